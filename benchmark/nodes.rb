# frozen_string_literal: true

# What N worker nodes cost one Redis, idle and under steady load, and
# whether any node is woken for nothing. The nodes are real Redis job
# sources of the Rust core (their own connections, heartbeat, fetcher,
# acker and subscriber threads), many per process:
# crates/solid_core/examples/node_scaling.rs. Node i serves channel
# ch<i % 20>, with one no-op worker thread.
#
#   bundle exec rake benchmark:nodes
#   BENCH_SMOKE=1 bundle exec rake benchmark:nodes   # N = 1, 3; 2 s phases
#
# Environment (defaults in parentheses):
#   BENCH_NODES       node counts, a list (1,10,50,200)
#   BENCH_SECONDS     length of each phase (20)
#   BENCH_RATE        jobs/s enqueued in the load phase, one at a time,
#                     round robin over ch0..ch19 (1000)
#   BENCH_OUTPUT_DIR  where nodes.{md,csv} go (benchmark/results; nowhere in a smoke run)
#
# Per N, after FLUSHALL: start the nodes, settle, then two phases: idle
# (heartbeats only, every 5 s) and load. Over each, the redis-server's
# INFO commandstats delta (less the harness's own INFO) and CPU time
# (/proc/<pid>/stat utime+stime, and the scheduler's runtime), the node
# process's CPU, and each node's own counters: claim calls, those that
# found nothing, doorbell messages received, jobs run, and jobs from a
# channel it does not serve.

require_relative "support/harness"
require_relative "support/measure"
require "json"

module Bench
  class Nodes < Harness
    CHANNELS = 20
    PHASES = %w[idle load].freeze
    SCRIPTS = %w[eval evalsha eval_ro evalsha_ro fcall fcall_ro].freeze
    TARGET = ENV["CARGO_TARGET_DIR"].to_s.empty? ? File.join(ROOT, "target") : ENV["CARGO_TARGET_DIR"]
    PROGRAM = File.join(TARGET, "release/examples/node_scaling")
    CSV_HEADER = %w[nodes phase row command calls per_second seconds redis_cpu_percent redis_scheduler_cpu_percent
                    node_process_cpu_percent enqueued jobs_run claims_per_node_s empty_claims_per_node_s
                    doorbells_per_node_s foreign_nodes].freeze

    # One phase at one N: Redis over `seconds`; per node {claims,
    # empty_claims, doorbells, ran, foreign} over the program's own window,
    # `node_seconds`; `baseline`: Redis CPU s/s with no client.
    Phase = Struct.new(:node_count, :name, :seconds, :commands, :redis_cpu, :redis_sched, :node_cpu, :node_seconds,
                       :enqueued, :nodes, :baseline, keyword_init: true) do
      def per_s(value) = value / seconds
      def total = commands.values.sum
      def scripts = commands.slice(*SCRIPTS).values.sum
      def redis_cpu_percent = 100 * per_s(redis_cpu)
      def sum(key) = nodes.sum { |n| n.fetch(key) }
      def per_node_s(key) = sum(key).fdiv(node_count) / node_seconds
      def found_per_node_s = per_node_s("claims") - per_node_s("empty_claims")
      def foreign_nodes = nodes.count { |n| n.fetch("foreign").positive? }
      def load? = name == "load"

      # Redis CPU ms per node per second above the server's own with no
      # client (idle); per 1,000 jobs enqueued (load).
      def cpu_ms_per_unit
        load? ? 1e6 * redis_sched / [enqueued, 1].max : 1000 * (per_s(redis_sched) - baseline) / node_count
      end
    end

    def initialize(settings)
      super
      @counts = settings.integers("BENCH_NODES", @smoke ? [1, 3] : [1, 10, 50, 200])
      @seconds = settings.integer("BENCH_SECONDS", @smoke ? 2 : 20)
      @rate = settings.integer("BENCH_RATE", 1000)
    end

    private

    def measure
      system("cargo", "build", "--release", "--quiet", "--example", "node_scaling", "-p", "solid_core", chdir: ROOT) or
        raise Failure, "cargo build --example node_scaling failed"
      # 200 nodes hold about a thousand connections.
      @lab.redis.call("config", "set", "maxclients", "10000")
      puts settings_line
      @baseline = baseline
      puts format("redis-server with no client: %.3f%% CPU (scheduler)", 100 * @baseline)
      @phases = @counts.flat_map { |count| run_nodes(count) }
      report
      true
    end

    def settings_line = "#{@counts.join(", ")} node(s), one channel each of #{CHANNELS}, one no-op worker thread; " \
                        "phases of #{@seconds} s: idle (heartbeat every 5 s), then load (#{@rate} jobs/s)"

    # The scheduler's runtime of redis-server per second with nothing
    # connected but the harness: its own timers (serverCron).
    def baseline
      pid = @lab.redis_server.pid
      sched, started = ProcFacts.scheduler_seconds(pid), Bench.now
      sleep(@smoke ? 1 : @seconds)
      (ProcFacts.scheduler_seconds(pid) - sched) / (Bench.now - started)
    end

    def run_nodes(count)
      @lab.redis.flushall
      log = File.join(@lab.dir, "nodes-#{count}.log")
      args = [PROGRAM, "--redis-url", @lab.url, "--nodes", count, "--channels", CHANNELS, "--rate", @rate,
              "--settle", @smoke ? 1 : 3, *PHASES.flat_map { |p| ["--phase", "#{p}:#{@seconds}"] }].map(&:to_s)
      phases = IO.popen(args, "r+", err: log) do |io|
        ready = read(io, log)
        PHASES.map { |name| run_phase(io, log, count, name) }.tap do |done|
          puts format("%d node(s) (started in %.1f s): %s", count, ready["start_seconds"], done.map do |p|
            format("%s %.0f cmds/s, Redis %.2f%% CPU", p.name, p.per_s(p.total), p.redis_cpu_percent)
          end.join("; "))
        end
      end
      status = Process.last_status
      raise Failure, "node_scaling failed (#{status}): #{File.read(log)[-2000..]}" unless status.success?

      phases
    end

    # Redis is read before the program is told to start the phase and after
    # it reported the phase's end, so its window holds the program's.
    def run_phase(io, log, count, name)
      pid = @lab.redis_server.pid
      read(io, log)
      commands = CommandStats.snapshot(@lab.redis)
      cpu, sched, node_cpu = ProcFacts.cpu_seconds(pid), ProcFacts.scheduler_seconds(pid), ProcFacts.cpu_seconds(io.pid)
      started = Bench.now
      io.puts "go"
      done = read(io, log)
      phase = Phase.new(node_count: count, name: name, seconds: Bench.now - started,
                        commands: CommandStats.delta(commands, CommandStats.snapshot(@lab.redis), {"info" => 1}),
                        redis_cpu: ProcFacts.cpu_seconds(pid) - cpu, redis_sched: ProcFacts.scheduler_seconds(pid) - sched,
                        node_cpu: ProcFacts.cpu_seconds(io.pid) - node_cpu, node_seconds: done["seconds"],
                        enqueued: done["enqueued"], baseline: @baseline,
                        nodes: done["nodes"].map { |values| done["columns"].zip(values).to_h })
      io.puts "next"
      phase
    end

    def read(io, log)
      line = io.gets or raise Failure, "node_scaling exited early: #{File.read(log)[-2000..]}"
      JSON.parse(line)
    end

    def report
      tables = PHASES.map do |name|
        phases = @phases.select { |p| p.name == name }
        load = phases.first.load?
        header = ["N", "Redis cmds/s", "Script calls/s", "Redis CPU % (stat)", "Redis CPU % (sched)",
                  load ? "Redis CPU ms per 1k jobs" : "Redis CPU ms/s per node (above baseline)", "Nodes' process CPU %",
                  *(["Enqueued/s", "Run/s"] if load), "Claims with jobs/node/s", "Empty claims/node/s", "Doorbells/node/s",
                  "Nodes with foreign jobs"]
        "**#{name}**\n\n#{Bench.table(header, phases.map { |p| row(p) })}\n"
      end
      publish("nodes", title: "Node scaling: N nodes on one Redis", body: tables.join("\n"), csv: csv,
                       intro: "#{settings_line}. #{METHOD} Run at #{run_time}; generated by `bundle exec rake benchmark:nodes`.")
    end

    def row(p)
      [p.node_count, Bench.delimit(p.per_s(p.total)), format("%.1f", p.per_s(p.scripts)), format("%.2f", p.redis_cpu_percent),
       format("%.3f", 100 * p.per_s(p.redis_sched)), format("%.3f", p.cpu_ms_per_unit), format("%.1f", 100 * p.per_s(p.node_cpu)),
       *([p.enqueued, p.sum("ran")].map { |n| Bench.delimit(n / p.node_seconds) } if p.load?),
       *[p.found_per_node_s, p.per_node_s("empty_claims"), p.per_node_s("doorbells")].map { |v| format("%.2f", v) },
       p.foreign_nodes]
    end

    METHOD = "Baseline: redis-server's CPU with no node connected, measured first. Redis cmds/s: INFO commandstats " \
             "delta over the phase (commands run inside Lua included; script calls: EVAL/EVALSHA/FCALL). Redis CPU: " \
             "redis-server utime+stime from /proc/<pid>/stat (10 ms ticks), and the scheduler's runtime of its threads, " \
             "which the per-node and per-1k-jobs figures use. Claims, empty claims (a claim that found nothing: a " \
             "wake-up for nothing), doorbell messages and foreign jobs (from a channel the node does not serve) are each " \
             "node's own counters, averaged over nodes. With N < 20 some channels have no node: their jobs wait " \
             "(Run/s < Enqueued/s)."

    def csv
      Bench.csv(CSV_HEADER, @phases.flat_map do |p|
        summary = [p.node_count, p.name, "summary", "ALL", p.total, p.per_s(p.total).round(2), p.seconds.round(3),
                   p.redis_cpu_percent.round(3), (100 * p.per_s(p.redis_sched)).round(4), (100 * p.per_s(p.node_cpu)).round(2),
                   p.enqueued, p.sum("ran"), p.found_per_node_s.round(4), p.per_node_s("empty_claims").round(4),
                   p.per_node_s("doorbells").round(4), p.foreign_nodes]
        [summary, *p.commands.sort.map { |cmd, calls| [p.node_count, p.name, "command", cmd, calls, p.per_s(calls).round(2)] }]
      end)
    end
  end
end

exit Bench::Nodes.main if $PROGRAM_NAME == __FILE__
