# frozen_string_literal: true

require "open3"

# On another Ruby than the system's (bin/test --ruby sets SOLID_JOBS_RUBY),
# gems come from Debian's ruby-* packages, and a package whose gem has a C
# extension carries it built for the system Ruby only. A test that needs such
# a gem (a Rails app needs nokogiri, through railties and actionpack) skips
# there, naming the gem that is missing. On the system Ruby nothing is
# probed: a missing gem fails the test as it always did.
module BundleProbe
  module_function

  def other_ruby? = ENV.key?("SOLID_JOBS_RUBY")

  # nil when the bundle of `gemfile` resolves on this Ruby, else why not.
  def missing(gemfile)
    out, status = Bundler.with_unbundled_env do
      Open3.capture2e({"BUNDLE_GEMFILE" => gemfile, "BUNDLE_FROZEN" => "true"}, "bundle", "check", chdir: File.dirname(gemfile))
    end
    return nil if status.success?

    # "The following gems are missing\n * nokogiri (1.13.10)\n ..."
    gems = out.lines.grep(/\A\s*\*\s/).map { |line| line.strip.delete_prefix("* ") }
    gems.any? ? "missing #{gems.join(", ")}" : out.lines.last.to_s.strip
  end

  # Skips `test` on another Ruby when the bundle cannot load there.
  def skip_unless_loads(test, gemfile, what)
    return unless other_ruby? && (why = missing(gemfile))

    test.skip("#{what} does not load on Ruby #{RUBY_VERSION} with Debian's gems: #{why} " \
              "(its Debian package's C extension is built for the system Ruby only)")
  end
end
