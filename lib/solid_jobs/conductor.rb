# frozen_string_literal: true

require "json"
require "securerandom"
require "socket"

module SolidJobs
  # Starts and stops one worker node in this process: the native dispatcher
  # (Rust I/O threads) and `concurrency` workers, each a Ractor or a thread.
  #
  # Shutdown (TERM/INT, a `shutdown` control request, or #stop): stop
  # claiming, let running tasks finish up to shutdown_timeout, write
  # completions, then requeue every claim still held at the head of its
  # channel. A second signal skips the wait.
  #
  # A NodeMonitor thread observes the node and acts on control requests
  # (docs/observability.md).
  class Conductor
    attr_reader :node_id, :dispatcher

    def initialize(config = SolidJobs.config)
      @config = config
      @node_id = SecureRandom.uuid
      @workers = []
    end

    # Starts the node. `wait_for_redis` (a block returning true to give up)
    # keeps retrying while Redis is unreachable, for processes started during
    # an outage; without it an unreachable Redis raises ConnectionError.
    def start(&wait_for_redis)
      @config.validate!
      take_logger
      # Every line from here on, Ruby's and the native threads', names this node.
      Log.node_id = @node_id
      SolidJobs.client # created here, in the main Ractor, before workers read it
      SolidJobs.routing
      # The app's task classes, loaded first (a Rails app with eager_load
      # off is eager-loaded): the lanes below and the schedules are decided
      # from the task classes, so a class an app would load lazily must
      # not be missing from either.
      Recurring.load_tasks
      # Checked before anything connects: a schedule routed to SolidEngine
      # raises NotSupported here, naming it.
      @schedules = @config.scheduler ? Recurring.by_backend(@config, SolidJobs.routing) : {}
      share_config
      warn_without_tasks
      @thread_tasks = Lanes.thread_task_names
      @thread_workers = Lanes.thread_workers(@config, @thread_tasks)
      @dispatcher = connect_dispatcher(&wait_for_redis) or return nil
      @started_at = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      # Ractors print an "experimental" warning on first use; this process
      # chose Ractors deliberately.
      Warning[:experimental] = false if @config.execution_mode == :ractor
      lane = Lanes::RACTOR if @thread_workers.positive?
      Lanes.open(@dispatcher, @config.concurrency, @thread_workers, @thread_tasks) if lane
      @workers = Array.new(@config.concurrency) { |i| spawn_worker(i + 1, lane) }
      @workers.concat(Array.new(@thread_workers) { |i| spawn_thread_worker(@config.concurrency + i + 1, Lanes::THREAD) })
      @monitor = NodeMonitor.new(@dispatcher, @config, node_id: @node_id, description: description_hash,
                                                       on_shutdown: method(:request_stop)).start
      Log.info("node #{@node_id} started: #{@config.concurrency} #{@config.execution_mode} worker(s), " \
               "channels #{@config.channels.map { |n, w| "#{n}(#{w})" }.join(", ")} (#{@config.channel_order}), " \
               "pid #{Process.pid}" +
               (lane ? "; #{@thread_workers} thread worker(s) for #{@thread_tasks.join(", ")}" : ""),
               node_id: @node_id, event: "node.started")
      Systemd.ready("running #{@workers.size} worker(s) on #{@config.channels.map(&:first).join(", ")}, node #{@node_id}")
      self
    end

    # Seconds the shutdown may take after the wait for running tasks
    # (writing completions, requeueing), and after a second signal. Hard
    # bounds: a Redis that never answers cannot stretch them; what could not
    # be written by then is left to recovery by other nodes.
    SHUTDOWN_GRACE = 5.0
    SECOND_SIGNAL_GRACE = 1.0

    # Graceful stop. Returns true when every running task finished in time.
    def stop(timeout: @config.shutdown_timeout)
      return true unless @dispatcher

      Systemd.stopping("stopping: waiting up to #{timeout}s for running tasks")
      @dispatcher.stop_claiming
      finished = @dispatcher.wait_idle(timeout)
      @monitor&.stop
      @finishing = true
      requeued = @dispatcher.shutdown(SHUTDOWN_GRACE)
      join_workers if finished
      Log.info("node #{@node_id} stopped: #{requeued} job(s) requeued" +
               (finished ? "" : " (#{@dispatcher.inflight} task(s) still running after #{timeout}s among them)"),
               node_id: @node_id, event: "node.stopped", requeued: requeued)
      # Later lines of this process are no longer this node's.
      Log.node_id = nil if Log.node_id == @node_id
      finished
    end

    # Stop at once: requeue everything held, including running tasks.
    def stop_now
      stop(timeout: 0)
    end

    # Runs until TERM or INT. Returns :stopped, or :timeout when tasks were
    # still running at shutdown_timeout (the caller should exit the process).
    def run
      reader, writer = IO.pipe
      @wakeup = writer
      previous = %w[TERM INT].to_h do |signal|
        [signal, Signal.trap(signal) { writer.write_nonblock(signal[0], exception: false) }]
      end
      started = start do |delay|
        IO.select([reader], nil, nil, delay) # a signal while waiting for Redis ends the wait
      end
      return :stopped unless started

      IO.select([reader])
      reader.read_nonblock(16, exception: false)
      Log.info("stopping: waiting up to #{@config.shutdown_timeout}s for running tasks (signal again to stop at once)")
      stopper = Thread.new { stop }
      until stopper.join(0.05)
        next unless IO.select([reader], nil, nil, 0) && reader.read_nonblock(16, exception: false)

        Log.warn("second signal: requeueing running tasks and exiting now")
        # Past the wait, the stop under way is already bounded: leave at once.
        @dispatcher.shutdown(SECOND_SIGNAL_GRACE) unless @finishing
        return :timeout
      end
      stopper.value ? :stopped : :timeout
    ensure
      @wakeup = nil
      previous&.each { |signal, handler| Signal.trap(signal, handler || "DEFAULT") }
    end

    # A graceful stop requested from another thread (a `shutdown` control
    # request): the same path as TERM under #run, else a stop of its own.
    def request_stop
      if (wakeup = @wakeup)
        wakeup.write_nonblock("S", exception: false)
      else
        Thread.new { stop }
      end
    end

    def stats
      @dispatcher&.stats || {}
    end

    private

    REDIS_WAIT_MAX = 5.0

    def connect_dispatcher
      delay = 0.1
      begin
        Ractor.make_shareable(build_dispatcher)
      rescue ConnectionError => e
        raise unless block_given?

        Log.warn("waiting for #{backend_names} (#{e.message}); retrying in #{delay.round(1)}s")
        return nil if yield(delay)

        delay = [delay * 2, REDIS_WAIT_MAX].min
        retry
      end
    end

    # Checked before anything is frozen: a configuration that cannot be
    # shared (an interceptor argument holding a Mutex) raises and leaves
    # every object, the caller's included, as it was.
    # What this node waits for when it cannot connect: "Redis",
    # "SolidEngine" or both, never Redis for an engine-only node.
    def backend_names
      SolidJobs.routing.group(@config.channels).map { |backend, _| backend.class.name.split("::").last }.uniq.join(" and ")
    end

    # A node that loaded no task of its own (started without --require, or
    # with a file that does not load the app) can run no job: say so at
    # start, not only per job.
    def warn_without_tasks
      built_in = Object.const_defined?(WarmPool::EXECUTOR) ? Object.const_get(WarmPool::EXECUTOR) : nil
      return unless Task.classes.none? { |klass| !klass.equal?(built_in) }

      Log.warn("no task classes are loaded (no class includes SolidJobs::Task): every job this node claims is an " \
               "unknown task, retried for unknown_task_retry_for (#{@config.unknown_task_retry_for}s) and then archived; " \
               "start the worker with --require PATH, the file or app directory that defines the tasks")
    end

    # A logger set on the configuration goes to SolidJobs::Log before the
    # configuration is made shareable (a Logger is not).
    def take_logger
      given, logger = @config.take_logger
      Log.logger = logger if given
    end

    def share_config
      Shareable.share!(@config, "the configuration", "worker Ractors read it once workers start " \
                                                     "(interceptor arguments are frozen deeply)")
    end

    def build_dispatcher
      c = @config
      # One job source per backend serving these channels; no Redis is
      # touched when every channel is routed elsewhere.
      groups = SolidJobs.routing.group(c.channels)
      specs = groups.map do |backend, channels|
        spec = backend.source_spec(channels, config: c, node_id: @node_id, description: description)
        schedules = @schedules.fetch(backend, [])
        schedules.empty? ? spec : spec.merge(schedules: schedules)
      end
      log_schedules(groups.map(&:first))
      Native::Dispatcher.new(specs, telemetry_spec)
    end

    # A schedule runs on the nodes that have a source for its backend (they
    # serve a channel there); say which schedules this node runs.
    def log_schedules(served)
      run, left = @schedules.partition { |backend, _| served.include?(backend) }.map { |part| part.flat_map(&:last) }
      Log.info("recurring scheduler: #{run.map { |s| s[:name] }.join(", ")}") unless run.empty?
      return if left.empty?

      Log.warn("schedule(s) #{left.map { |s| s[:name] }.join(", ")} not run by this node: their channels' backend is one " \
               "this node serves no channel on; nodes that do run them")
    end

    # Entries a node buffers for the journal between flushes; beyond this
    # new entries are dropped (and the gap shows in the sequence).
    TELEMETRY_BUFFER = 10_000

    def telemetry_spec
      c = @config
      {namespace: c.namespace, node_id: @node_id, journal: c.telemetry, sample_per_interval: c.telemetry_sample_rate,
       buffer: TELEMETRY_BUFFER, journal_size: c.telemetry_journal_size, deliver: !Instrumentation.null?(c.instrumenter),
       observation_ttl: c.observation_interval * 3.0}
    end

    def description = JSON.generate(description_hash)

    def description_hash
      @description_hash ||= {
        "node_id" => @node_id, "hostname" => Socket.gethostname, "pid" => Process.pid, "concurrency" => @config.concurrency,
        "execution_mode" => @config.execution_mode.to_s, "thread_workers" => @thread_workers, "channels" => @config.channels,
        "started_ms" => Clock.now_ms, "version" => VERSION, "ruby" => RUBY_VERSION,
        # The heartbeat's interval, and the TTL each heartbeat sets on the
        # node key: readers tell the age of the last heartbeat from what is
        # left (Nodes.heartbeat_age_ms; /health, /metrics, solid-jobs health).
        "heartbeat_interval_ms" => (@config.heartbeat_interval * 1000).round,
        "heartbeat_ttl_ms" => (@config.recovery_delay * 1000).round
      }
    end

    def spawn_worker(id, lane)
      if @config.execution_mode == :ractor
        RactorCompat.spawn(@dispatcher, id, lane, @node_id,
                           name: "solid-jobs-worker-#{id}") do |dispatcher, worker_id, worker_lane, node_id|
          SolidJobs::Worker.new(dispatcher, worker_id, lane: worker_lane, node_id: node_id).run
        end
      else
        spawn_thread_worker(id, lane)
      end
    end

    def spawn_thread_worker(id, lane)
      name = lane ? "solid-jobs-thread-worker-#{id}" : "solid-jobs-worker-#{id}"
      Thread.new { Worker.new(@dispatcher, id, lane: lane, node_id: @node_id).run }.tap { |t| t.name = name }
    end

    def join_workers
      @workers.each do |w|
        w.is_a?(Thread) ? w.join : RactorCompat.join(w)
      rescue StandardError => e
        Log.error("worker ended with #{e.class}: #{e.message}")
      end
      @workers.clear
    end
  end
end
