# frozen_string_literal: true

# SolidEngine by itself: the Rust load generator (solid-engine-bench:
# PUSHMANY, FETCH, ACKMANY in batches) against a fresh solid-engine-server
# per durability mode (memory, balanced, strict), over a Unix socket.
# SolidJobs end to end on SolidEngine is in `rake benchmark:comparison`
# (the solid-jobs-engine clients).
#
# Then the compaction phase (issue 18): a balanced server loaded with
# BENCH_COMPACTION_JOBS jobs compacts while a probe client times single
# PUSH / FETCH / ACK operations (solid-engine-bench --compaction-probe):
# p50, p99 and max latency of the operations that overlapped the
# compaction, and of the others (the same load, no compaction running).
#
#   bundle exec rake benchmark:engine
#   BENCH_SMOKE=1 bundle exec rake benchmark:engine   # seconds, for tests
#
# Environment (defaults in parentheses):
#   BENCH_JOBS          jobs per durability mode (200000; 2000 in smoke runs)
#   BENCH_REPETITIONS   runs per mode, keeping the fastest (1)
#   BENCH_CASE_TIMEOUT  seconds one run may take before it fails (300)
#   BENCH_OUTPUT_DIR    where engine.md goes (benchmark/results; nowhere in a smoke run)
#   BENCH_COMPACTION_JOBS  jobs loaded before the compaction phase (524288; 20000 in smoke runs)
#   BENCH_BASE_SERVER   another solid-engine-server binary (an older build):
#                       every load-generator run is made against it too, the
#                       two alternating, and the report adds head/base ratios
#   BENCH_BASE_LABEL    what the report calls it (a commit)

require_relative "support/harness"

module Bench
  class Engine < Harness
    BENCH_BINARY = File.join(ROOT, "target/release/solid-engine-bench")
    DURABILITIES = %w[memory balanced strict].freeze
    # One producer and one consumer connection. The server runs a thread per
    # connection, so this already keeps four threads busy on a 2-core host;
    # two of each measured slower here (more contention, no more cores).
    # Batches of 1000 are what SolidJobs' own producers and prefetch reach
    # for no-op jobs.
    SHAPE = {producers: 1, consumers: 1, batch: 1000}.freeze
    TARGET = 100_000
    END_TO_END = %r{^push\+fetch\+ack end to end: (\d+) jobs/s \(([\d.]+) s\)}
    PUSH = %r{^push: (\d+) jobs/s}

    Result = Struct.new(:durability, :jobs, :push_rate, :rate, :seconds, :error, :base, keyword_init: true) do
      def ok? = error.nil?
    end

    PROBE_LINE = /^(during compaction|outside compaction): ops=(\d+) p50_ms=([\d.]+) p99_ms=([\d.]+) max_ms=([\d.]+)/
    PROBE_HEAD = /^compaction probe: .*churn_jobs=(\d+) compactions=(\d+) compaction_window_ms=(\d+)/
    # Completed churn jobs are forgotten at once, so the log outgrows twice
    # the live state (the compaction trigger) after a bounded churn.
    PROBE_SERVER_FLAGS = ["--completed-retention-ms", "100", "--compact-threshold-bytes", (8 << 20).to_s].freeze
    Probe = Struct.new(:jobs, :churn, :window_ms, :during, :outside, :error, keyword_init: true) do
      def ok? = error.nil?
    end

    def initialize(settings)
      super
      @jobs = settings.integer("BENCH_JOBS", @smoke ? 2000 : 200_000)
      @repetitions = settings.integer("BENCH_REPETITIONS", 1)
      @timeout = settings.integer("BENCH_CASE_TIMEOUT", 300)
      @compaction_jobs = settings.integer("BENCH_COMPACTION_JOBS", @smoke ? 20_000 : 524_288)
      @base_server = ENV.fetch("BENCH_BASE_SERVER", nil)
    end

    private

    # The fastest of the repetitions: noise from a shared host only ever
    # slows a run down. A failed run makes the case fail.
    def measure
      results = DURABILITIES.map do |durability|
        # With a base server the two alternate, so drift on a shared host
        # reaches both alike.
        # Which goes first alternates too (a run can warm the page cache or
        # the CPU's clock for the next).
        pairs = Array.new(@repetitions) do |i|
          next [measure_once(durability), nil] unless @base_server

          base_first = i.odd?
          base = measure_once(durability, binary: @base_server) if base_first
          head = measure_once(durability)
          base ||= measure_once(durability, binary: @base_server)
          [head, base]
        end
        runs = pairs.map(&:first)
        best = runs.find { |r| !r.ok? } || runs.max_by(&:rate)
        bases = pairs.filter_map(&:last)
        best.base = bases.find { |r| !r.ok? } || bases.max_by(&:rate) unless bases.empty?
        best
      end
      probe = measure_compaction
      report(results, probe)
      results.all?(&:ok?) && (probe.nil? || probe.ok?)
    end

    # A balanced server, BENCH_COMPACTION_JOBS jobs, one compaction under
    # a steady single-operation client (see the probe's docs in
    # crates/solid_engine/src/bin/solid-engine-bench.rs).
    def measure_compaction
      print "compaction probe, #{Bench.delimit(@compaction_jobs)} jobs, balanced durability: "
      probe = Probe.new(jobs: @compaction_jobs)
      server = EngineServer.new(durability: "balanced", dir: File.join(@lab.dir, "compaction"), extra: PROBE_SERVER_FLAGS,
                                children: @lab.children).start
      arguments = ["--socket", server.socket, "--compaction-probe", @compaction_jobs.to_s,
                   "--jobs", (@compaction_jobs * 20).to_s, "--batch", SHAPE[:batch].to_s]
      generator = ChildProcess.new([BENCH_BINARY, *arguments], log: File.join(@lab.dir, "probe.log"),
                                                               children: @lab.children).start
      status = generator.wait(timeout: @timeout)
      unless status&.success?
        raise Failure, "solid-engine-bench --compaction-probe exited with #{status.inspect}: #{generator.log_tail}"
      end

      output = File.read(generator.log)
      head = output.match(PROBE_HEAD) or raise Failure, "no compaction probe summary in: #{output}"
      probe.churn = Integer(head[1])
      probe.window_ms = Integer(head[3])
      output.scan(PROBE_LINE).each do |what, ops, p50, p99, max|
        figures = {ops: Integer(ops), p50: Float(p50), p99: Float(p99), max: Float(max)}
        what == "outside compaction" ? probe.outside = figures : probe.during = figures
      end
      raise Failure, "no latency figures in: #{output}" unless probe.during && probe.outside

      puts format("during compaction p99 %.3f ms, max %.3f ms (%d ops, window %d ms)", probe.during[:p99], probe.during[:max],
                  probe.during[:ops], probe.window_ms)
      probe
    rescue Failure, ProcessError, SystemCallError => e
      puts "ERROR"
      probe.error = failure_text(e)
      probe
    ensure
      server&.cleanup
    end

    def measure_once(durability, binary: EngineServer::BINARY)
      print "load generator, #{durability} durability#{" (base server)" unless binary == EngineServer::BINARY}: "
      result = Result.new(durability: durability, jobs: @jobs)
      # A directory (and log) per run: logs are appended to, and a second
      # run reading the first's figures from a shared log was the result.
      @run = @run.to_i + 1
      server = EngineServer.new(durability: durability, dir: File.join(@lab.dir, "#{durability}-#{@run}"),
                                children: @lab.children, binary: binary).start
      result.push_rate, result.rate, result.seconds = load_generator(server)
      verify_acked(server)
      status = server.stop
      unless status&.success?
        raise Failure, "solid-engine-server (#{durability}) did not stop cleanly (#{status.inspect}):\n#{server.log_tail}"
      end

      puts format("%.0f jobs/s push+fetch+ack (%.3f s), push alone %.0f jobs/s", result.rate, result.seconds, result.push_rate)
      result
    rescue Failure, ProcessError, SolidJobs::Error, SystemCallError => e
      puts "ERROR"
      result.error = failure_text(e)
      result
    ensure
      server&.cleanup
    end

    # Runs to completion (killed after the case timeout); the generator
    # times itself, from the first push to the last ack.
    def load_generator(server)
      raise Failure, "#{BENCH_BINARY} is missing; run `bundle exec rake engine:build`" unless File.executable?(BENCH_BINARY)

      arguments = ["--socket", server.socket, "--jobs", @jobs.to_s, *SHAPE.flat_map { |name, value| ["--#{name}", value.to_s] }]
      generator = ChildProcess.new([BENCH_BINARY, *arguments], log: File.join(server.dir, "loadgen.log"),
                                                               children: @lab.children).start
      status = generator.wait(timeout: @timeout)
      raise Failure, "solid-engine-bench exited with #{status.inspect}: #{generator.log_tail}" unless status&.success?

      output = File.read(generator.log)
      end_to_end = output.match(END_TO_END) or raise Failure, "no end-to-end rate in solid-engine-bench output: #{output}"
      [output.match(PUSH)&.then { |m| Float(m[1]) }, Float(end_to_end[1]), Float(end_to_end[2])]
    end

    # The load generator counts its own acks; the server's count confirms
    # that its rate covers every job.
    def verify_acked(server)
      reply = SolidJobs::Native::EngineClient.new(server.url, nil).call(["STATS"])
      stats = reply.each_line(chomp: true).to_h { |l| l.split(":", 2) }
      return if stats["acked_total"] == @jobs.to_s && stats["ready"] == "0" && stats["reserved"] == "0"

      raise Failure, "after the load generator, engine STATS say acked_total=#{stats["acked_total"]} (expected #{@jobs}), " \
                     "ready=#{stats["ready"]}, reserved=#{stats["reserved"]}"
    end

    def report(results, probe = nil)
      rows = results.map do |r|
        figures = r.ok? ? [Bench.delimit(r.push_rate), Bench.delimit(r.rate), format("%.3f", r.seconds)] : %w[error error n/a]
        [r.durability, Bench.delimit(r.jobs), *figures]
      end
      memory = results.find { |r| r.durability == "memory" }
      what = "load generator, memory durability (push+fetch+ack)"
      target = if memory&.ok?
                 "#{(memory.rate >= TARGET ? "PASS" : "MISS").ljust(5)} #{what} = #{Bench.delimit(memory.rate)} jobs/s " \
                   "(target >= #{Bench.delimit(TARGET)})"
               else
                 "n/a   #{what} (not measured)"
               end
      table = Bench.table(["Durability", "Jobs", "Push jobs/s", "Push+fetch+ack jobs/s", "Seconds"], rows)
      table += "\n\n#{base_section(results)}" if @base_server
      publish("engine", title: "SolidEngine throughput",
                        body: "Load generator, jobs/s per durability mode:\n\n#{table}\n\n#{compaction_section(probe)}" \
                              "Targets:\n- #{target}",
                        intro: "Jobs: #{@jobs} per load-generator run (every durability mode); " \
                               "fastest of #{@repetitions} run(s) per mode. Run at #{run_time}. #{METHOD}")
    end

    # Head against the base server, fastest run of each, measured in turn.
    def base_section(results)
      rows = results.map do |r|
        base = r.base
        next [r.durability, "error", "error", "n/a", "n/a"] unless r.ok? && base&.ok?

        [r.durability, Bench.delimit(base.push_rate), Bench.delimit(base.rate), Bench.delimit(r.rate),
         format("%.2fx", r.rate / base.rate)]
      end
      "Against the base server (#{ENV.fetch("BENCH_BASE_LABEL", @base_server)}), the two alternating, " \
        "fastest of #{@repetitions} each:\n\n" +
        Bench.table(["Durability", "Base push jobs/s", "Base push+fetch+ack jobs/s", "Head push+fetch+ack jobs/s",
                     "Head/base"], rows)
    end

    def compaction_section(probe)
      return "" unless probe
      return "Compaction probe: error\n\n" unless probe.ok?

      rows = [["during compaction", probe.during], ["outside compaction", probe.outside]].map do |what, f|
        [what, Bench.delimit(f[:ops]), format("%.3f", f[:p50]), format("%.3f", f[:p99]), format("%.3f", f[:max])]
      end
      table = Bench.table(["Probe operations", "Ops", "p50 ms", "p99 ms", "max ms"], rows)
      "Single PUSH / FETCH / ACK latency while a balanced server holding #{Bench.delimit(probe.jobs)} jobs compacts " \
        "(compaction window #{probe.window_ms} ms, #{Bench.delimit(probe.churn)} churn jobs to grow the log):\n\n#{table}\n\n"
    end

    METHOD = "Load generator: `solid-engine-bench` (Rust; producers #{SHAPE[:producers]}, consumers #{SHAPE[:consumers]}, " \
             "batch #{SHAPE[:batch]}, 100-byte payloads) against a fresh `solid-engine-server` per durability mode over a " \
             "Unix socket, timed by itself from the first push to the last ack. " \
             "Generated by `bundle exec rake benchmark:engine`.".freeze
  end
end

exit Bench::Engine.main if $PROGRAM_NAME == __FILE__
