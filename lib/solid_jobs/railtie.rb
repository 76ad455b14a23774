# frozen_string_literal: true

module SolidJobs
  # Makes `config.active_job.queue_adapter = :solid_jobs` work in a Rails
  # app: Active Job 6.1 finds adapters by constant, so the adapter must be
  # loaded before Active Job applies its configuration.
  #
  # Applies config/solid_jobs.yml (Rails.env's section) when the app has
  # one, after the app's initializers: every process of the app (the web
  # server and console that enqueue, as well as `solid-jobs` workers) then
  # reads the same redis_url, namespace and routing from it, so a producer
  # never enqueues where no worker looks. The precedence is the workers':
  # the file beats the app's SolidJobs.configure. A bad file fails the boot
  # with ConfigurationError naming the file and line, as it fails a worker.
  #
  # Loads the app's code when a worker node starts, before it decides its
  # lanes and collects its recurring schedules, when config.eager_load is off (the development default): a task's
  # `task_options recurring:` exists only once its class is loaded, so an
  # app that loads lazily would otherwise have the schedule on no node, or
  # on some (docs/recurring.md, "Where a node finds a schedule's task").
  class Railtie < ::Rails::Railtie
    initializer "solid_jobs.active_job", before: "active_job.set_configs" do
      ActiveSupport.on_load(:active_job) { require "solid_jobs/active_job" }
    end

    initializer "solid_jobs.config_file", after: :load_config_initializers do |app|
      SolidJobs::ConfigFile.apply(app: app.root.to_s, environment: Rails.env.to_s)
    end

    # Called when a worker node starts (before it decides its thread lane
    # and collects its schedules) and by `solid-jobs recurring`
    # and the dashboard's Recurring page, after the app booted; never while
    # the app boots. Application#eager_load! is Rails' public "load the
    # whole app" in both autoloader modes of 6.1 (Zeitwerk, classic) and in
    # 7, and loads what a production node (eager_load on) loads, so a
    # development node collects the same schedules.
    def self.load_tasks
      app = ::Rails.application
      return unless app&.initialized? && !app.config.eager_load

      app.eager_load!
    end
  end
end

# Set when this file loads, not in an initializer: the `solid-jobs`
# command loads SolidJobs before the app, and requires this file once the
# app has booted Rails (CLI.load_app), when initializers have run already.
SolidJobs::Recurring.task_loader = SolidJobs::Railtie.method(:load_tasks)
