# frozen_string_literal: true

require_relative "subcommand"
require_relative "health"

module SolidJobs
  # `solid-jobs health [--node ID | --local] [options]`: a probe for
  # Kubernetes, Docker or a load balancer (SolidJobs::Health). Prints one
  # line and exits:
  #
  #   0   healthy: every backend answered and the nodes heartbeat (with
  #       --liveness also when a backend did not answer: said so)
  #   1   a backend (Redis or SolidEngine) did not answer, or answered
  #       with an error, within --timeout
  #   2   the backends answered, but the nodes did not pass: none live,
  #       stale, or --node not registered, dead or stale (or --node/--local
  #       where no backend keeps a node registry)
  #   64  usage: a bad flag
  #
  # The whole check takes at most --timeout (default 3 s), whatever the
  # backends do.
  class HealthCommand < Subcommand
    HEALTHY = 0
    BACKEND_DOWN = 1
    NODES_UNHEALTHY = 2
    COMMAND = "solid-jobs health"
    BANNER = "Usage: solid-jobs health [--node ID | --local] [options]\n\n" \
             "Exits 0 when every backend the configuration routes to answers and the nodes heartbeat\n" \
             "(without --node or --local: at least one node is live and fresh). Otherwise one line says why:\n" \
             "exit 1 a backend did not answer, 2 the nodes did not pass, 64 usage."

    private

    def call(options)
      health = Health.new(timeout: options[:timeout], node: options[:node], local: options[:local])
      result = health.check
      code = report(result, options[:liveness])
      leave(code) if health.stragglers?
      code
    end

    # The one line, and the exit code. --liveness: a backend that does
    # not answer is not this process's fault and a restart would not bring
    # it back, so it passes (saying so); only nodes that fail while the
    # backends answer make the probe fail.
    def report(result, liveness)
      if result.healthy?
        @out.puts("solid-jobs health: ok: #{result.reason}")
        HEALTHY
      elsif liveness && result.failure == :backend
        @out.puts("solid-jobs health: ok (liveness; a restart would not help): #{result.reason}")
        HEALTHY
      else
        @err.puts("solid-jobs health: unhealthy: #{result.reason}")
        result.failure == :backend ? BACKEND_DOWN : NODES_UNHEALTHY
      end
    end

    # A backend that never answered still holds a thread in a blocking
    # read (bounded by the probe's own timeouts); the answer is known, so
    # the probe leaves now rather than when that read gives up.
    def leave(code)
      @out.flush
      @err.flush
      Kernel.exit!(code)
    end

    def defaults = {timeout: Health::DEFAULT_TIMEOUT}

    def define_options(parser, options)
      parser.on("--node ID", "This node must be live and fresh (its id: the dashboard's Nodes page, or the log)") do |v|
        options[:node] = v
      end
      parser.on("--local", "The nodes started on this host (by hostname) must be live and fresh, at least one") do
        options[:local] = true
      end
      parser.on("--liveness", "For a liveness probe: a backend that does not answer passes (exit 0, said so); " \
                              "nodes failing while the backends answer still fail") do
        options[:liveness] = true
      end
      parser.on("--timeout SECONDS", Float, "Longest the whole check takes (default #{Health::DEFAULT_TIMEOUT})") do |v|
        raise UsageError, "invalid --timeout #{v} (seconds, more than 0)" unless v.positive?

        options[:timeout] = v
      end
    end

    def validate(options)
      raise UsageError, "--node and --local both name the nodes to check: use one" if options[:node] && options[:local]
    end
  end
end
