# frozen_string_literal: true

# What an idle worker costs: CPU of the worker process and Redis commands
# per second while it has nothing to do, for SolidJobs (its CLI, Redis
# backend) and Sidekiq (its CLI), one after the other against one private
# redis-server.
#
#   bundle exec rake benchmark:idle
#   BENCH_SMOKE=1 bundle exec rake benchmark:idle   # seconds, for tests
#
# Environment (defaults in parentheses):
#   BENCH_SECONDS         length of the measured idle window (10)
#   BENCH_SETTLE_SECONDS  wait after the warm-up jobs, before it (2)
#   BENCH_WARMUP_JOBS     no-op jobs processed first, so the worker is booted
#                         and has done real work (50)
#   BENCH_CONCURRENCY     worker concurrency (threads / Ractors), a list (8)
#   BENCH_RECURRING       SolidJobs runs this many recurring schedules (every 1,
#                         30, 60, 300... s; their jobs go to a channel the
#                         worker does not serve), so the window measures the
#                         scheduler on an idle node (0: none)
#   BENCH_SMOKE=1         1 s window, 1 s settle, 10 jobs
#   BENCH_OUTPUT_DIR      where idle.{md,csv} go (benchmark/results; nowhere in a smoke run)
#
# Per system: FLUSHALL, start the worker, push the warm-up jobs, wait until
# they are processed, settle, then over the window read the worker's CPU
# time (/proc/<pid>/stat utime+stime, all threads; and the scheduler runtime
# of its threads, which resolves wake-ups shorter than a clock tick) and the
# server's INFO commandstats at both ends, less the one INFO of the
# harness's own inside the window. A MONITOR connection records the same
# window so SolidJobs' commands can be split into its heartbeat tick and
# anything else.

require_relative "support/systems"
require "sidekiq"
require "digest"
require_relative "../test/support/command_meter"
require_relative "jobs"

module Bench
  class Idle < Harness
    CLIENTS = %w[sidekiq solid-jobs].freeze
    WARM_UP_TIMEOUT = 60
    # How long MONITOR may lag behind the window's closing INFO.
    MONITOR_LAG = 5
    LUA_DIR = File.join(ROOT, "crates/solid_core/lua")
    CSV_HEADER = %w[system row command calls per_second heartbeat_calls concurrency window_seconds cpu_seconds cpu_percent
                    scheduler_cpu_seconds scheduler_cpu_percent error].freeze

    # One idle worker over a window of `seconds`: CPU its process used, from
    # /proc/<pid>/stat and from the scheduler's runtime (nil where
    # unavailable); the Redis calls in the window ({name => calls}); and
    # for SolidJobs `heartbeat`, those that were its heartbeat tick (nil
    # when not attributed).
    Result = Struct.new(:client, :concurrency, :seconds, :cpu_seconds, :scheduler_cpu_seconds, :commands, :heartbeat, :error,
                        keyword_init: true) do
      def ok? = error.nil?
      def label = client == "sidekiq" ? "Sidekiq" : "SolidJobs"
      def cpu_percent = 100.0 * cpu_seconds / seconds
      def scheduler_cpu_percent = scheduler_cpu_seconds && 100.0 * scheduler_cpu_seconds / seconds
      def total_commands = commands.values.sum
      def commands_per_second = total_commands / seconds
      def heartbeat_total = heartbeat&.values&.sum

      # Calls of `name` not explained by the heartbeat (all of them when
      # nothing was attributed). Counted from commandstats, so a command
      # MONITOR did not show still counts here.
      def beyond_heartbeat(name) = [commands.fetch(name, 0) - (heartbeat&.fetch(name, 0) || 0), 0].max
      def beyond_heartbeat_total = commands.keys.sum { |name| beyond_heartbeat(name) }
    end

    def initialize(settings)
      super
      @seconds = settings.integer("BENCH_SECONDS", @smoke ? 1 : 10)
      @settle = settings.integer("BENCH_SETTLE_SECONDS", @smoke ? 1 : 2)
      @warmup = settings.integer("BENCH_WARMUP_JOBS", @smoke ? 10 : 50)
      @concurrencies = settings.integers("BENCH_CONCURRENCY", [8])
      @recurring = ENV["BENCH_RECURRING"] ? settings.integer("BENCH_RECURRING", 1) : 0
      # The heartbeat is one EVALSHA of heartbeat.lua, which the node loads
      # with the Lua prelude prepended (see scripts.rs); Redis names a
      # loaded script by its SHA1.
      body = File.read(File.join(LUA_DIR, "heartbeat.lua"))
      sources = [body, "#{File.read(File.join(LUA_DIR, "prelude.lua"))}\n#{body}"]
      # scripts.rs puts the allow-oom shebang line first on scripts that must
      # run when Redis is out of memory; the heartbeat is one of them.
      shebang = File.read(File.join(LUA_DIR, "../src/redis/scripts.rs"))[/^const ALLOW_OOM: &str = "([^"]+)";/, 1]
      sources += sources.map { |source| "#{shebang}\n#{source}" } if shebang
      @shas = sources.map { |source| Digest::SHA1.hexdigest(source) }
    end

    private

    def measure
      puts settings_line
      @results = @concurrencies.product(CLIENTS).map { |concurrency, client| measure_case(Bench.system(client), concurrency) }
      report
      @results.all?(&:ok?)
    end

    def settings_line
      "Idle window #{@seconds} s after #{@warmup} warm-up jobs and #{@settle} s settle; worker concurrency " \
        "#{@concurrencies.join(", ")} (SolidJobs: default execution mode, Ractors" \
        "#{", #{@recurring} recurring schedule(s)" if @recurring.positive?})"
    end

    def measure_case(system, concurrency)
      print "#{system.name} c=#{concurrency}: "
      result = Result.new(client: system.name, concurrency: concurrency)
      system.prepare(@lab)
      workers = system.start_workers(concurrency, env: @recurring.positive? ? {"BENCH_RECURRING" => @recurring.to_s} : {})
      warm_up(system, workers)
      sleep @settle
      observe_idle(system, workers, result)
      puts format("%.2f%% CPU (/proc stat), %s%% (scheduler), %.2f Redis cmds/s", result.cpu_percent,
                  result.scheduler_cpu_percent ? format("%.3f", result.scheduler_cpu_percent) : "n/a", result.commands_per_second)
      result
    rescue Failure, ProcessError, CommandCounts::Error, Redis::BaseError, SystemCallError => e
      puts "ERROR"
      result.error = failure_text(e, workers)
      result
    ensure
      workers&.stop
    end

    # Sidekiq writes its processed counter only every few seconds, so for it
    # an empty queue has to do (the no-op jobs still held by its threads
    # finish long before the settle time is over).
    def warm_up(system, workers)
      system.enqueue_many(system.job("Noop"), Array.new(@warmup) { |i| [i] })
      deadline = Bench.now + WARM_UP_TIMEOUT
      until system.family == :sidekiq ? system.waiting.zero? : system.counts[:processed] >= @warmup
        raise Failure, "worker exited (#{workers.exit_status}) during warm-up" if workers.exited?
        raise Failure, "warm-up jobs not processed within #{WARM_UP_TIMEOUT}s" if Bench.now > deadline

        sleep 0.05
      end
    end

    # The window is bounded by two INFO commandstats calls on a connection
    # of its own; in the MONITOR stream those two calls mark the same window,
    # so both counts cover exactly the same commands.
    def observe_idle(system, workers, result)
      probe = Redis.new(url: @lab.url)
      probe_address = probe.call("client", "info")[/\baddr=(\S+)/, 1]
      monitor = CommandCounts::Monitor.new(@lab.redis_server.port)
      pid = workers.pids.first
      before = CommandStats.snapshot(probe)
      cpu_before, scheduler_before = ProcFacts.cpu_seconds(pid), ProcFacts.scheduler_seconds(pid)
      started = Bench.now
      sleep @seconds
      cpu_after, scheduler_after = ProcFacts.cpu_seconds(pid), ProcFacts.scheduler_seconds(pid)
      result.seconds = Bench.now - started
      after = CommandStats.snapshot(probe)
      raise Failure, "worker exited (#{workers.exit_status}) during the idle window" if workers.exited?

      result.cpu_seconds = cpu_after - cpu_before
      result.scheduler_cpu_seconds = scheduler_after - scheduler_before if scheduler_before && scheduler_after
      result.commands = CommandStats.delta(before, after, {"info" => 1})
      result.heartbeat = heartbeat_calls(monitor, probe_address) if system.family == :solid
    ensure
      monitor&.stop
      probe&.close
    end

    # {command name => calls} of the heartbeat ticks in the window: the
    # EVALSHA of the heartbeat script, the commands the script runs (they
    # follow it with source "lua"), and what the heartbeat thread sends in
    # the same pipelined round trip on its connection (the telemetry
    # journal and observations). nil (not attributed) when MONITOR did not
    # deliver the window's end in time; every command then counts as
    # beyond the heartbeat.
    def heartbeat_calls(monitor, probe_address)
      own = ->(entry) { entry.source == probe_address }
      return nil unless monitor.wait_for(MONITOR_LAG) { |entries| entries.count(&own) >= 2 }

      entries = monitor.entries
      first, last = entries.each_index.select { |i| own.(entries[i]) }.first(2)
      window = entries[(first + 1)...last]
      # The node loads its scripts once and then calls them by SHA, so in an
      # idle window the heartbeat only ever arrives as EVALSHA.
      tick = ->(e) { %w[evalsha evalsha_ro].include?(e.name) && @shas.any? { |sha| e.args.first.to_s.casecmp?(sha) } }
      tick_sources = window.select(&tick).map(&:source).uniq
      in_heartbeat = false
      window.each_with_object(Hash.new(0)) do |entry, calls|
        in_heartbeat = tick.(entry) unless entry.lua?
        calls[entry.name] += 1 if in_heartbeat || tick_sources.include?(entry.source)
      end
    end

    def report
      summary_rows = @results.map do |r|
        next [r.label, r.concurrency, "error", "", "", "", "", ""] unless r.ok?

        [r.label, r.concurrency, format("%.1f", r.seconds), format("%.2f", r.cpu_percent), percent(r.scheduler_cpu_percent),
         r.total_commands, format("%.2f", r.commands_per_second), split_of(r)]
      end
      summary = Bench.table(["System", "Concurrency", "Idle window s", "Worker CPU % (/proc stat)", "Worker CPU % (scheduler)",
                             "Redis cmds", "Redis cmds/s", "Of which"], summary_rows)
      command_rows = @results.select(&:ok?).flat_map do |r|
        r.commands.sort_by { |name, calls| [-calls, name] }.map do |name, calls|
          [r.label, name, calls, format("%.2f", calls / r.seconds), attribution(r, name)]
        end
      end
      commands = Bench.table(["System", "Command", "Calls", "Calls/s", "Counted as"], command_rows)
      loaded = @shas.zip(Array(@lab.redis.script(:exists, @shas))).select(&:last).map(&:first)
      where = loaded.any? ? "loaded in this redis-server" : "NOT loaded in this redis-server: attribution by SHA found nothing"
      heartbeat = "Heartbeat script: SHA1 #{loaded.first || @shas.join(" or ")} of crates/solid_core/lua/heartbeat.lua " \
                  "with the Lua prelude (#{where}); " \
                  "the heartbeat tick also counts what the heartbeat thread's connection sends with it (the telemetry flush)."
      targets = @concurrencies.flat_map { |c| target_lines(c) }
      errors = @results.reject(&:ok?).map { |r| "- #{r.label} c=#{r.concurrency}: #{r.error}" }
      body = with_errors([summary, "", "Redis commands in the idle window:", "", commands, "", heartbeat, "", "Targets:",
                          *targets.map { |l| "- #{l}" }], errors)
      publish("idle", title: "Idle cost: SolidJobs vs Sidekiq", body: body, csv: csv,
                      intro: "#{settings_line}. #{METHOD} Run at #{run_time}; generated by `bundle exec rake benchmark:idle`.")
    end

    METHOD = "Worker CPU: /proc/<pid>/stat utime+stime of the worker process (all threads) over the window, as a share of " \
             "one core (clock-tick resolution); also the scheduler's runtime of its threads (se.sum_exec_runtime in " \
             "/proc/<pid>/task/*/sched), which sees wake-ups too short for a tick. Redis commands: INFO commandstats delta " \
             "over the same window (less the harness's own INFO), commands run inside Lua scripts included. SolidJobs' " \
             "heartbeat: EVALSHA of the heartbeat script and the commands it runs, attributed through MONITOR."

    def percent(value) = value ? format("%.3f", value) : "n/a"

    def split_of(result)
      return "-" unless result.client == "solid-jobs"
      return "not attributed" unless result.heartbeat

      "#{result.heartbeat_total} heartbeat, #{result.beyond_heartbeat_total} other"
    end

    def attribution(result, name)
      return "-" unless result.heartbeat

      beyond = result.beyond_heartbeat(name)
      return "heartbeat" if beyond.zero?
      return "beyond heartbeat" if beyond == result.commands.fetch(name)

      "heartbeat #{result.commands.fetch(name) - beyond}, beyond #{beyond}"
    end

    # "PASS ..." / "MISS ..."; "n/a" when a case could not be measured.
    def target_lines(concurrency)
      solid, sidekiq = CLIENTS.reverse.map { |client| @results.find { |r| r.client == client && r.concurrency == concurrency } }
      [cpu_line(solid, sidekiq), commands_line(solid)]
    end

    def cpu_line(solid, sidekiq)
      what = "idle worker CPU: SolidJobs <= Sidekiq"
      return "n/a   #{what} (needs both measured)" unless solid&.ok? && sidekiq&.ok?

      line = format("%-5s %s: %.2f%% vs %.2f%% of one core (/proc stat)",
                    solid.cpu_percent <= sidekiq.cpu_percent ? "PASS" : "MISS", what, solid.cpu_percent, sidekiq.cpu_percent)
      # /proc stat counts clock ticks: a difference of at most one tick over
      # the window says nothing about which worker is cheaper.
      if (solid.cpu_seconds - sidekiq.cpu_seconds).abs <= ProcFacts::RESOLUTION
        line += format(" (%s: /proc stat resolves %.0f ms, %.2f%% of this window)",
                       solid.cpu_seconds == sidekiq.cpu_seconds ? "equal" : "differ by one clock tick",
                       ProcFacts::RESOLUTION * 1000, 100.0 * ProcFacts::RESOLUTION / solid.seconds)
      end
      return line unless solid.scheduler_cpu_percent && sidekiq.scheduler_cpu_percent

      line + format("; scheduler runtime %.3f%% vs %.3f%%", solid.scheduler_cpu_percent, sidekiq.scheduler_cpu_percent)
    end

    def commands_line(solid)
      what = "SolidJobs idle Redis commands beyond the heartbeat"
      return "n/a   #{what} (not measured)" unless solid&.ok?
      return "n/a   #{what} (heartbeat not attributed: MONITOR failed)" unless solid.heartbeat

      beyond = solid.beyond_heartbeat_total
      evalsha = solid.heartbeat.fetch("evalsha", 0)
      # Schedules enqueue jobs by design: what they add is reported, not a
      # target (one recurring.lua call per node per tick per schedule).
      if @recurring.positive?
        return format("info  %s = %d with %d recurring schedule(s): %d of them EVALSHAs of recurring.lua and the " \
                      "commands they run (%.2f cmds/s)", what, beyond, @recurring, solid.beyond_heartbeat("evalsha"),
                      beyond / solid.seconds)
      end
      format("%-5s %s = %d (target 0); heartbeat ticks: %d EVALSHA + %d more (run by the script, or the telemetry " \
             "flush pipelined with it) = %.2f cmds/s",
             beyond.zero? ? "PASS" : "MISS", what, beyond, evalsha, solid.heartbeat_total - evalsha,
             solid.heartbeat_total / solid.seconds)
    end

    def csv
      Bench.csv(CSV_HEADER, @results.flat_map do |r|
        next [[r.client, "summary", nil, nil, nil, nil, r.concurrency, nil, nil, nil, nil, nil, r.error]] unless r.ok?

        summary = [r.client, "summary", "ALL", r.total_commands, r.commands_per_second.round(3), r.heartbeat_total, r.concurrency,
                   r.seconds.round(3), r.cpu_seconds.round(3), r.cpu_percent.round(3), r.scheduler_cpu_seconds&.round(6),
                   r.scheduler_cpu_percent&.round(4), nil]
        [summary, *r.commands.sort.map do |name, calls|
          [r.client, "command", name, calls, (calls / r.seconds).round(3), r.heartbeat&.fetch(name, 0), r.concurrency,
           r.seconds.round(3), nil, nil, nil, nil, nil]
        end]
      end)
    end
  end
end

exit Bench::Idle.main if $PROGRAM_NAME == __FILE__
