# frozen_string_literal: true

require "fileutils"
require "open3"
require_relative "../bundled_gems"

# How the suite starts `solid-jobs` processes (workers, the engine, warm
# workers): the way the README tells users to, `bundle exec solid-jobs ...`
# in an app whose Gemfile has the gem, so each start goes through Bundler
# and the gem's executable (the RubyGems binstub Bundler installs), not
# `ruby -Ilib exe/solid-jobs`.
#
# The app bundle is tmp/test-bundle: a Gemfile with `gem "solid-jobs",
# path: <checkout>` (the code under test, with the extension `rake compile`
# built) plus the gems the test apps load (activejob), resolved with
# `bundle install --local` once per test process. Its GEM_HOME is private,
# so the binstub is written there and not into the system's bin directory.
module SolidJobsCommand
  ROOT = File.expand_path("../../..", __dir__)
  # One bundle per Ruby ABI: gems with extensions, binstubs and lockfiles
  # belong to the Ruby that installed them (bin/test --ruby).
  DIR = File.join(ROOT, "tmp", "test-bundle", RUBY_VERSION[/\A\d+\.\d+/])
  GEMFILE = File.join(DIR, "Gemfile")
  GEM_HOME = File.join(DIR, "gems")
  BINSTUB = File.join(GEM_HOME, "bin", "solid-jobs")
  # An app with Active Job 6.1 on Ruby 3.4 lists the libraries 3.4 made
  # bundled gems and Active Support 6.1 requires (the checkout's Gemfile
  # reads the same list).
  ACTIVE_SUPPORT_GEMS = BundledGems::ACTIVE_SUPPORT.map { |g| "gem #{g.inspect}\n" }.join
  GEMS = <<~RUBY.freeze
    source "https://rubygems.org"
    gem "solid-jobs", path: #{ROOT.inspect}
    gem "activejob", "~> 6.1" # test/support/active_jobs.rb
    #{ACTIVE_SUPPORT_GEMS}
  RUBY
  LOCK = Mutex.new

  module_function

  # argv for Process.spawn / Open3: `bundle exec solid-jobs ARGS`.
  def argv(*args) = ["bundle", "exec", "solid-jobs", *args]

  # The environment of a process in the app bundle: this process's
  # environment without the suite's own Bundler settings, plus `extra`.
  # Pass it with `unsetenv_others: true`.
  def env(extra = {})
    prepare
    bundle_env.merge(extra.transform_values { |v| v&.to_s })
  end

  def bundle_env
    base = defined?(Bundler) ? Bundler.unbundled_env : ENV.to_h
    base.merge("BUNDLE_GEMFILE" => GEMFILE, "GEM_HOME" => GEM_HOME,
               "GEM_PATH" => [GEM_HOME, *Gem.path].uniq.join(File::PATH_SEPARATOR),
               "BUNDLE_SILENCE_ROOT_WARNING" => "1")
  end

  def spawn(extra_env, *args, **options)
    Process.spawn(env(extra_env), *argv(*args), unsetenv_others: true, **options)
  end

  def capture3(extra_env, *args, **options)
    Open3.capture3(env(extra_env), *argv(*args), unsetenv_others: true, **options)
  end

  # `bundle exec ruby ARGS` in the app bundle: a producer or a script.
  def ruby3(extra_env, *args, **options)
    Open3.capture3(env(extra_env), "bundle", "exec", "ruby", *args, unsetenv_others: true, **options)
  end

  # Once per test process, but test files run in parallel processes
  # (script/run-tests) that share the bundle: a `bundle install` rewrites
  # the binstub, and another process running it meanwhile ran an empty file
  # (exit 0, no output; seen as a health probe that printed nothing). So
  # the first process installs under an exclusive lock on the directory,
  # and the others find the bundle complete (`bundle check`, which writes
  # nothing) and leave it alone.
  def prepare
    LOCK.synchronize do
      return if @prepared

      FileUtils.mkdir_p(DIR)
      File.open(File.join(DIR, ".prepare.lock"), File::RDWR | File::CREAT, 0o644) do |lock|
        lock.flock(File::LOCK_EX)
        install unless gemfile_current? && installed?
      end
      @prepared = true
    end
  end

  def gemfile_current? = File.exist?(GEMFILE) && File.read(GEMFILE) == GEMS

  def installed?
    return false unless File.exist?(BINSTUB) && File.exist?("#{GEMFILE}.lock")

    _, status = Open3.capture2e(bundle_env, "bundle", "check", unsetenv_others: true, chdir: DIR)
    status.success?
  end

  def install
    File.write(GEMFILE, GEMS) unless gemfile_current?
    out, status = Open3.capture2e(bundle_env, "bundle", "install", "--local", "--quiet", unsetenv_others: true, chdir: DIR)
    raise "bundle install --local for the test app failed:\n#{out}" unless status.success?
    return if File.exist?(BINSTUB)

    raise "bundle install wrote no solid-jobs binstub in #{GEM_HOME}/bin"
  end
end
