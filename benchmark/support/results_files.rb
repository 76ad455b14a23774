# frozen_string_literal: true

require "csv"
require "fileutils"

module Bench
  # A harness's results as `<dir>/<name>.md` (the report) and
  # `<dir>/<name>.csv` (the same figures, for plotting or comparing runs).
  module ResultsFiles
    module_function

    # Each file goes through a temporary file and a rename, so an
    # interrupted run never leaves half a results file behind. Returns the
    # paths written.
    def write(dir, name, markdown:, csv_header:, csv_rows:)
      FileUtils.mkdir_p(dir)
      markdown_path = File.join(dir, "#{name}.md")
      csv_path = File.join(dir, "#{name}.csv")
      replace(markdown_path, markdown)
      replace(csv_path, [csv_header, *csv_rows].map { |row| CSV.generate_line(row) }.join)
      [markdown_path, csv_path]
    end

    # One file, through a temporary file and a rename (readers never see a
    # half-written file); creates its directory.
    def write_file(path, content)
      FileUtils.mkdir_p(File.dirname(path))
      replace(path, content)
    end

    def replace(path, content)
      temporary = "#{path}.tmp"
      File.write(temporary, content)
      File.rename(temporary, path)
    end
  end
end
