# frozen_string_literal: true

require_relative "boot"
require "logger"
require "rails"
require "active_job/railtie"

Bundler.require(*Rails.groups)
require_relative "../lib/demo_ledger"

module ExampleApp
  class Application < Rails::Application
    config.load_defaults 6.1
    config.root = File.expand_path("..", __dir__)
    # Tasks must be loaded before worker Ractors start: a Ractor cannot
    # autoload. Eager loading does that for everything under app/.
    config.eager_load = true
    config.active_job.queue_adapter = :solid_jobs
    config.logger = Logger.new($stdout)
    # Active Job logs a retried failure with its backtrace; the demo shows
    # the retry in its own output instead.
    config.log_level = :fatal
    config.secret_key_base = "example-only"
  end
end
