# frozen_string_literal: true

module SolidJobs
  # Lifecycle events for `config.instrumenter` (docs/observability.md).
  #
  #   class StatsdInstrumenter
  #     def instrument(name, payload) = STATSD.increment(name, tags: ["task:#{payload[:task]}"])
  #   end
  #   SolidJobs.configure { |c| c.instrumenter = StatsdInstrumenter.new.freeze }
  #
  # Worker Ractors call the instrumenter, so it must be Ractor-shareable:
  # the setter checks that it can be, or raises ConfigurationError and
  # leaves it as it was; SolidJobs.configure deep-freezes it once the whole
  # block has succeeded. Payloads carry
  # identifiers, timestamps, durations and error classes: never arguments,
  # envelopes, error messages or log text.
  module Instrumentation
    # The default: every emitter checks `null?` first and then builds no
    # payload at all, so an application without an instrumenter pays one
    # identity comparison per event.
    class Null
      def instrument(_name, _payload) = nil
    end

    NULL = Ractor.make_shareable(Null.new)

    JOB_EVENTS = %w[job.enqueued job.journaled job.reserved job.started job.completed job.failed job.retry_scheduled
                    job.dead job.acknowledged job.recovered].freeze
    OBSERVED_EVENTS = %w[process.observed ractor.observed redis.observed].freeze

    # A failing instrumenter is logged at most this often per thread.
    LOG_EVERY_SECONDS = 60

    module_function

    def null?(instrumenter) = instrumenter.equal?(NULL)

    # Calls the instrumenter. A StandardError it raises is logged
    # (rate-limited) and swallowed: the event is lost, the job is not
    # affected. Interrupts, signals and exits are not rescued, so a process
    # being stopped still stops and shutdown requeues what is held.
    def emit(instrumenter, name, payload)
      instrumenter.instrument(name, payload)
      nil
    rescue StandardError => e
      report_failure(name, e)
      nil
    end

    def report_failure(name, error)
      now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      last = Thread.current[:solid_jobs_instrumenter_failed_at]
      return if last && now - last < LOG_EVERY_SECONDS

      Thread.current[:solid_jobs_instrumenter_failed_at] = now
      Log.warn("the instrumenter raised #{error.class} on #{name} (#{error.message.to_s[0, 200]}); the event was dropped " \
               "and nothing else changed; further failures on this thread are logged at most once a minute")
    rescue StandardError
      nil
    end

    # The instrumenter, when worker Ractors could share it; otherwise
    # ConfigurationError saying why not. Freezes nothing: a refused
    # instrumenter, and everything it holds ($stdout inside a Logger),
    # is left exactly as it was.
    def check!(instrumenter)
      unless instrumenter.respond_to?(:instrument)
        raise ConfigurationError,
              "invalid instrumenter #{instrumenter.inspect}: expected an object responding to instrument(name, payload)"
      end

      reason = Shareable.obstacle(instrumenter, "instrumenter")
      return instrumenter unless reason

      raise ConfigurationError, "the instrumenter must be Ractor-shareable, because worker Ractors call it " \
                                "(#{reason}); keep no mutable state in it (freeze it, or write to a shareable sink); " \
                                "nothing was frozen"
    end

    # Makes an instrumenter shareable (deep-frozen) for worker Ractors, or
    # raises ConfigurationError saying why it cannot be, changing nothing.
    def shareable!(instrumenter) = Ractor.make_shareable(check!(instrumenter))

    # "path:line" of the raising frame: where, never what (no message).
    def location(error)
      frame = error.backtrace_locations&.first
      frame ? "#{frame.path}:#{frame.lineno}" : error.backtrace&.first.to_s[/\A[^:]+:\d+/]
    end
  end
end
