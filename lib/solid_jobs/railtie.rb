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
  class Railtie < ::Rails::Railtie
    initializer "solid_jobs.active_job", before: "active_job.set_configs" do
      ActiveSupport.on_load(:active_job) { require "solid_jobs/active_job" }
    end

    initializer "solid_jobs.config_file", after: :load_config_initializers do |app|
      SolidJobs::ConfigFile.apply(app: app.root.to_s, environment: Rails.env.to_s)
    end
  end
end
