# frozen_string_literal: true

require_relative "test_helper"
require "open3"
require "tmpdir"
require_relative "support/bundle_probe"

# A Rails app's own processes (the server and console that enqueue) read
# config/solid_jobs.yml too, through the Railtie, so producers and workers
# agree on where jobs go. Booted in a child process: a real Rails app in a
# directory of its own, not this repo.
class RailtieConfigFileTest < SolidJobsTest
  BOOT = <<~RUBY
    require "rails"
    require "active_job/railtie"
    require "solid_jobs"
    class ProbeApp < Rails::Application
      config.root = ARGV.fetch(0)
      config.eager_load = false
      config.logger = Logger.new(nil)
      config.active_job.queue_adapter = :solid_jobs
    end
    # What the app's initializer would say; the file beats it.
    SolidJobs.configure { |c| c.namespace = "from_initializer" }
    ProbeApp.initialize!
    puts [SolidJobs.config.namespace, SolidJobs.config.concurrency].join(" ")
  RUBY

  # Rails through the example app's bundle (this repo's bundle leaves
  # railties out on purpose; see the Gemfile).
  GEMFILE = File.expand_path("../examples/rails_app/Gemfile", __dir__)

  def setup
    super
    BundleProbe.skip_unless_loads(self, GEMFILE, "Rails 6.1 (examples/rails_app)")
  end

  def boot(root, env)
    Bundler.with_unbundled_env do
      Open3.capture3({"BUNDLE_GEMFILE" => GEMFILE, "RAILS_ENV" => env, "SOLID_JOBS_LOG_LEVEL" => "none"},
                     "bundle", "exec", RbConfig.ruby, "-e", BOOT, root)
    end
  end

  def with_app(yaml)
    Dir.mktmpdir("solid-jobs-rails") do |root|
      FileUtils.mkdir_p(File.join(root, "config"))
      File.write(File.join(root, "config", "solid_jobs.yml"), yaml) if yaml
      yield root
    end
  end

  def test_the_apps_own_processes_apply_the_environments_section
    yaml = "shared:\n  concurrency: 3\nproduction:\n  namespace: shop_prod\ndevelopment:\n  namespace: shop_dev\n"
    with_app(yaml) do |root|
      out, err, status = boot(root, "production")
      assert status.success?, err
      assert_equal "shop_prod 3", out.strip
      out, err, status = boot(root, "development")
      assert status.success?, err
      assert_equal "shop_dev 3", out.strip
    end
  end

  def test_without_a_file_the_apps_configuration_stands
    with_app(nil) do |root|
      out, err, status = boot(root, "production")
      assert status.success?, err
      assert_equal "from_initializer 8", out.strip
    end
  end

  def test_a_bad_file_fails_the_boot_naming_the_file
    with_app("production:\n  concurency: 3\n") do |root|
      _out, err, status = boot(root, "production")
      refute status.success?
      assert_match(%r{config/solid_jobs\.yml:2: unknown key.*concurency.*did you mean.*concurrency}, err)
    end
  end
end
