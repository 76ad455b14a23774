# frozen_string_literal: true

require_relative "worker_process"

module Bench
  # Sidekiq behind the interface of the SolidJobs systems in e2e_systems.rb
  # (prepare / start_worker / finish / cleanup), so a harness can run the
  # same case on all three. The caller has required sidekiq.
  class SidekiqSystem
    def initialize(children, server, redis)
      @children = children
      @server = server
      @redis = redis
    end

    def key = :sidekiq
    def label = "Sidekiq #{Sidekiq::VERSION}"

    # A private redis-server shared with the other systems: flushed per case.
    def prepare(_name)
      @redis.flushall
      Sidekiq.configure_client { |config| config.redis = {url: @server.url} }
    end

    def start_worker(concurrency, log_path, **options)
      WorkerProcess.sidekiq(@children, @server.url, concurrency, log_path, **options).start
    end

    def finish = nil
    def cleanup = nil
  end
end
