# frozen_string_literal: true

require "solid_jobs/health"

module SolidJobs
  class Web
    # `/health` (and `/health.json`): SolidJobs::Health as JSON for a load
    # balancer or an orchestrator's probe. 200 when every backend answers
    # and at least one node is fresh, 503 otherwise; the body gives each
    # backend's reachability and each node's heartbeat age, never a URL or
    # a password, and nothing of any job.
    #
    # Bounded: a hung Redis gives a 503 within TIMEOUT, not a request that
    # hangs with the other pages' 5 s read timeout (Health uses clients of
    # its own, kept for the app's life so probes reuse their connections).
    #
    # Authentication: like every page by default; `Web.new(public_health:
    # true)` (`solid-jobs web --public-health`) answers /health without it,
    # for probes that cannot authenticate (decision in docs/decisions.md).
    class HealthEndpoint
      PATHS = %w[/health /health.json].freeze
      TIMEOUT = 2.0

      def self.path?(path) = PATHS.include?(path.to_s.chomp("/"))

      def initialize(timeout: TIMEOUT)
        @timeout = timeout
        @lock = Mutex.new
      end

      # [status, body Hash]
      def call
        result = check
        [result.healthy? ? 200 : 503, result.to_h.merge("checked_ms" => Clock.now_ms)]
      rescue ConfigurationError, ArgumentError => e
        [503, {"status" => "unhealthy", "reason" => "configuration: #{Native.redact(e.message)}", "checked_ms" => Clock.now_ms}]
      end

      private

      # One Health per app: built at the first probe, once the application
      # configured SolidJobs.
      def check
        health = @lock.synchronize { @health ||= Health.new(timeout: @timeout) }
        health.check
      end
    end
  end
end
