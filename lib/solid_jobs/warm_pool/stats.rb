# frozen_string_literal: true

module SolidJobs
  module WarmPool
    # Per-process counters of warm pool round trips, and the latest round
    # trip times (for percentiles). Kept by the main Ractor, where the
    # executor runs (it is a thread task); exhaustion (timeouts, refused
    # connections) is also counted in Redis, under
    # `<namespace>:metric:warm_pool:timeouts` and `...:refused`, so it is
    # visible across processes.
    class Stats
      COUNTERS = %w[roundtrips ok remote_errors timeouts refused].freeze
      # Round-trip samples kept for percentiles; older ones are dropped.
      SAMPLES = 10_000

      def initialize
        @lock = Mutex.new
        reset
      end

      def reset
        @lock.synchronize do
          @counts = COUNTERS.to_h { |name| [name, 0] }
          @samples = []
        end
      end

      # outcome: "ok", "remote_error", "timeout" or "refused".
      def record(outcome, seconds)
        @lock.synchronize do
          @counts["roundtrips"] += 1
          @counts[COUNTER_FOR.fetch(outcome)] += 1
          next unless seconds

          @samples << seconds
          @samples.shift(@samples.size - SAMPLES) if @samples.size > SAMPLES
        end
      end
      COUNTER_FOR = {"ok" => "ok", "remote_error" => "remote_errors", "timeout" => "timeouts", "refused" => "refused"}.freeze

      # {"roundtrips", "ok", "remote_errors", "timeouts", "refused",
      #  "exhausted" (timeouts + refused), "p50_ms", "p95_ms", "p99_ms"}
      def to_h
        @lock.synchronize do
          sorted = @samples.sort
          @counts.merge("exhausted" => @counts["timeouts"] + @counts["refused"])
                 .merge(%w[p50 p95 p99].to_h { |p| ["#{p}_ms", percentile(sorted, p[1..].to_i)] })
        end
      end

      def samples = @lock.synchronize { @samples.dup }

      private

      def percentile(sorted, pct)
        return nil if sorted.empty?

        (sorted[((sorted.size - 1) * pct / 100.0).round] * 1000).round(3)
      end
    end

    class << self
      # This process's warm pool figures (see Stats#to_h); {} in a Ractor.
      def stats
        Ractor.current == Ractor.main ? stats_keeper.to_h : {}
      end

      def stats_keeper
        @stats_keeper ||= Stats.new
      end

      # Counts one round trip and publishes the `warm_pool.roundtrip` event
      # with its time. The executor runs on thread workers (main Ractor);
      # should it run in a Ractor (no thread workers), nothing is recorded.
      def record_roundtrip(outcome, seconds, payload)
        return unless Ractor.current == Ractor.main

        stats_keeper.record(outcome, seconds)
        count_in_redis(outcome) if %w[timeout refused].include?(outcome)
        instrument("warm_pool.roundtrip", payload.merge(outcome: outcome, seconds: seconds))
      end

      # SolidJobs' instrumenter when one is configured; else Active Support
      # notifications (`warm_pool.roundtrip.solid_jobs`) when loaded (Rails).
      def instrument(name, payload)
        config = SolidJobs.config
        if config.respond_to?(:instrumenter) && config.instrumenter && !SolidJobs::Instrumentation.null?(config.instrumenter)
          config.instrumenter.instrument(name, payload)
        elsif defined?(SolidJobs::Instrumentation) && SolidJobs::Instrumentation.respond_to?(:instrument)
          SolidJobs::Instrumentation.instrument(name, payload)
        elsif defined?(::ActiveSupport::Notifications)
          ::ActiveSupport::Notifications.instrument("#{name}.solid_jobs", payload)
        end
      rescue StandardError => e
        Log.warn("instrumenting #{name} raised #{e.class}: #{e.message}")
      end

      private

      def count_in_redis(outcome)
        redis = SolidJobs.routing.redis or return
        metric = "warm_pool:#{outcome == "timeout" ? "timeouts" : "refused"}"
        redis.client.call(["INCR", Native::Keyspace.new(SolidJobs.config.namespace).metric(metric)])
      rescue StandardError => e
        Log.warn("could not count a warm pool #{outcome} in Redis (#{e.class}: #{e.message})")
      end
    end
  end
end
