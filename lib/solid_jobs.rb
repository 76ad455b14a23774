# frozen_string_literal: true

require "solid_jobs/version"
require "solid_jobs/errors"
require "solid_jobs/reflection"
require "solid_jobs/native"
require "solid_jobs/clock"
require "solid_jobs/scan"
require "solid_jobs/ractor_compat"
require "solid_jobs/log"
require "solid_jobs/shareable"
require "solid_jobs/interceptor_chain"
require "solid_jobs/instrumentation"
require "solid_jobs/configuration"
require "solid_jobs/recurring"
require "solid_jobs/testing"
require "solid_jobs/publisher"
require "solid_jobs/executor"
require "solid_jobs/failure_policy"
require "solid_jobs/task"
require "solid_jobs/backends"
require "solid_jobs/channels"
require "solid_jobs/archive"
require "solid_jobs/integrity_check"
require "solid_jobs/telemetry/journal"
require "solid_jobs/catalog"
require "solid_jobs/observations"
require "solid_jobs/console"
require "solid_jobs/nodes"
require "solid_jobs/warm_pool"
require "solid_jobs/lanes"
require "solid_jobs/worker"
require "solid_jobs/process_observation"
require "solid_jobs/node_monitor"
require "solid_jobs/systemd"
require "solid_jobs/conductor"

# SolidJobs: background jobs for Ruby with a Rust engine.
#
# Producers call `Task.enqueue`; workers run `solid-jobs` (a Conductor with
# worker Ractors fed by native I/O threads). See README.md and
# docs/architecture.md.
module SolidJobs
  # The dashboard, loaded when first named (`mount SolidJobs::Web => "/jobs"`):
  # a worker never loads it.
  autoload :Web, "solid_jobs/web"
  # config/solid_jobs.yml: the commands read it; an app's own processes
  # (a Rails server enqueueing) call SolidJobs::ConfigFile.apply.
  autoload :ConfigFile, "solid_jobs/config_file"

  class << self
    # The process configuration. Frozen (and Ractor-shareable) once a
    # Conductor starts, so worker Ractors can read it.
    def config
      @config ||= Configuration.new
    end

    # Yields a copy of the configuration and installs it only when the
    # block and validate! succeed: a configure that raises changes nothing
    # (no setting, no interceptor, no frozen instrumenter), and the next one
    # starts from the last good configuration.
    def configure
      raise ConfigurationError, "configuration is frozen: workers have started" if config.frozen?

      draft = config.dup
      yield draft
      draft.validate!
      Instrumentation.shareable!(draft.instrumenter)
      Log.apply(draft)
      if @client && (@client.url != draft.redis_url || @client_namespace != draft.namespace ||
                     @client_timeouts != draft.timeouts)
        @client = nil
      end
      @routing = nil
      @config = draft
    end

    # The shareable native client. Created in the main Ractor (by the first
    # enqueue or by the Conductor); worker Ractors read the same instance.
    def client
      @client || begin
        unless Ractor.current == Ractor.main
          raise Error, "SolidJobs.client is not initialized; it is created in the main Ractor before workers start"
        end

        @client_namespace = config.namespace
        @client_timeouts = config.timeouts
        @client = Ractor.make_shareable(Native::Client.new(config.redis_url, config.namespace, @client_timeouts))
      end
    end

    # Which backend serves each channel. Built in the main Ractor (by the
    # first enqueue or by the Conductor); worker Ractors read the same one.
    def routing
      @routing || begin
        unless Ractor.current == Ractor.main
          raise Error, "SolidJobs.routing is not initialized; it is built in the main Ractor before workers start"
        end

        @routing = Routing.build(config)
        flush_telemetry_at_exit
        @routing
      end
    end

    # A producer's journal entries of its last second are written at exit
    # (the flush thread writes once a second). Registered once per process.
    def flush_telemetry_at_exit
      return if @telemetry_flush_registered

      @telemetry_flush_registered = true
      at_exit do
        @routing&.backends&.each_value { |b| b.client.flush_telemetry if b.is_a?(Backends::Redis) }
      rescue StandardError
        nil
      end
    end

    # True while the node running the current task is shutting down (it
    # has stopped claiming: TERM, a `shutdown` request, Conductor#stop): a
    # long task can stop at a safe point and enqueue its remainder. False
    # outside a SolidJobs worker thread.
    def stopping?
      dispatcher = Thread.current[:solid_jobs_dispatcher]
      dispatcher ? dispatcher.stopping? : false
    end

    # Replaces configuration, client and routing (tests, forking servers).
    def reset!
      @config = Configuration.new
      @client = nil
      @routing = nil
    end
  end
end

module SolidJobs
  # Active Job finds `queue_adapter = :solid_jobs` by constant
  # (`ActiveJob::QueueAdapters.lookup` is a const_get of
  # "SolidJobsAdapter"), so the constant must be there whatever was
  # required first. Under Rails the railtie loads the adapter when Active
  # Job loads; elsewhere an autoload on ActiveJob::QueueAdapters does:
  # registered now if Active Job is loaded, else the moment Active Job
  # defines that module (the `solid-jobs` command loads SolidJobs before the
  # app's `--require` file loads Active Job). Without Active Job nothing of
  # it is loaded (activejob is not a dependency). Runs when SolidJobs is
  # required and again when Bundler requires the gem by name
  # ("solid-jobs"), which in a process that loaded SolidJobs before the app
  # is the first time Rails is there. Idempotent.
  def self.integrate_frameworks
    require "solid_jobs/railtie" if defined?(::Rails::Railtie)
    if defined?(::ActiveJob::QueueAdapters)
      register_active_job_adapter(::ActiveJob::QueueAdapters)
    else
      watch_for_active_job
    end
  end

  # Module#autoload through the core method: ActiveSupport::Autoload
  # replaces `autoload` on Active Job's modules with its own signature.
  def self.register_active_job_adapter(queue_adapters)
    @active_job_watch&.disable
    Module.instance_method(:autoload).bind_call(queue_adapters, :SolidJobsAdapter, "solid_jobs/active_job")
  end
  private_class_method :register_active_job_adapter

  # A TracePoint on class/module bodies, until the body of
  # ActiveJob::QueueAdapters opens; it then registers the autoload and
  # turns itself off. TracePoints are per Ractor: worker Ractors never see
  # it. Main Ractor only, like the app's loading.
  def self.watch_for_active_job
    return if @active_job_watch&.enabled? || Ractor.current != Ractor.main

    @active_job_watch ||= TracePoint.new(:class) do |tp|
      mod = tp.self
      register_active_job_adapter(mod) if Reflection.name(mod) == "ActiveJob::QueueAdapters"
    end
    @active_job_watch.enable
  end
  private_class_method :watch_for_active_job
end
SolidJobs.integrate_frameworks
