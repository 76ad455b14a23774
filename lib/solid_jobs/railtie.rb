# frozen_string_literal: true

module SolidJobs
  # Makes `config.active_job.queue_adapter = :solid_jobs` work in a Rails
  # app: Active Job 6.1 finds adapters by constant, so the adapter must be
  # loaded before Active Job applies its configuration.
  class Railtie < ::Rails::Railtie
    initializer "solid_jobs.active_job", before: "active_job.set_configs" do
      ActiveSupport.on_load(:active_job) { require "solid_jobs/active_job" }
    end
  end
end
