# frozen_string_literal: true

require "open3"
require "shellwords"

# Another Ruby than the one running this process, set up the way
# `bin/test --ruby` runs the suite (script/ruby-env): its PATH, gems and
# bundle. The benchmarks start SolidJobs workers on it next to workers on
# the running Ruby, so one run compares the two.
module OtherRuby
  ROOT = File.expand_path("../..", __dir__)

  class Error < StandardError; end

  module_function

  # The ruby binary for "3.4": SOLID_JOBS_RUBY_3_4 when set, else what
  # script/ruby-3.4 builds (or finds already built).
  def binary(version)
    (@binaries ||= {})[version] ||= find(version)
  end

  # {"3.4" => "ruby 3.4.5 (2025-07-16 ...)"} for every version used so far.
  def used
    (@binaries || {}).transform_values do |ruby|
      IO.popen({"RUBYOPT" => nil, "GEM_PATH" => nil, "BUNDLE_GEMFILE" => nil}, [ruby, "-v"], &:read).strip
    end
  end

  def find(version)
    override = ENV["SOLID_JOBS_RUBY_#{version.tr(".", "_")}"]
    return override if override

    script = File.join(ROOT, "script", "ruby-#{version}")
    raise Error, "no Ruby #{version}: set SOLID_JOBS_RUBY_#{version.tr(".", "_")} to its binary" unless File.executable?(script)

    out, status = Open3.capture2e(script)
    raise Error, "#{script} failed:\n#{out.lines.last(10).join}" unless status.success?

    out.lines.last.strip
  end

  # The environment script/ruby-env prints for `ruby`, as a spawn env Hash
  # (unset variables map to nil).
  def env(ruby)
    (@envs ||= {})[ruby] ||= read_env(ruby).freeze
  end

  def read_env(ruby)
    out, status = Open3.capture2e(File.join(ROOT, "script", "ruby-env"), ruby)
    raise Error, "script/ruby-env #{ruby} failed:\n#{out}" unless status.success?

    out.lines.each_with_object({}) do |line, env|
      words = Shellwords.split(line)
      case words.first
      when "export" then words.drop(1).each { |pair| env.store(*pair.split("=", 2)) }
      when "unset" then words.drop(1).each { |name| env[name] = nil }
      end
    end
  end
end
