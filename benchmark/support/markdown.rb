# frozen_string_literal: true

module Bench
  module Markdown
    module_function

    # A table padded to column width, so it reads as well in a terminal as
    # rendered.
    def table(header, rows)
      cells = [header, *rows].map { |row| row.map(&:to_s) }
      widths = header.each_index.map { |i| cells.map { |row| row[i].length }.max }
      line = ->(row) { "| " + row.each_with_index.map { |cell, i| cell.ljust(widths[i]) }.join(" | ") + " |" }
      separator = "|" + widths.map { |w| "-" * (w + 2) }.join("|") + "|"
      [line.(cells.first), separator, *cells.drop(1).map(&line)].join("\n")
    end
  end
end
