# frozen_string_literal: true

require "securerandom"
require_relative "command_meter"

module CommandCounts
  # The SolidJobs tasks whose Redis traffic is counted. They do nothing but
  # raise or return, so every command measured is SolidJobs' own.
  module Tasks
    # The channel the measured node serves.
    CHANNEL = "bench"

    class Noop
      include SolidJobs::Task
      task_options channel: CHANNEL

      def execute_task(*) = nil
    end

    # Warms a producer's connection on a channel of its own, so the measured
    # enqueue still finds its channel empty (and rings the doorbell).
    class Warmup
      include SolidJobs::Task
      task_options channel: "warmup"

      def execute_task(*) = nil
    end

    # Fails every time; the retry is due long after the measurement ends,
    # so the only promotion in the window is the one the `planned` doorbell
    # triggers at once, which finds nothing due.
    class Failing
      include SolidJobs::Task
      task_options channel: CHANNEL
      retry_delay { 600 }

      def execute_task(*) = raise(ArgumentError, "failing on purpose, to count a retry")
    end

    # A unique task (docs/unique.md): its enqueue runs enqueue_unique.lua.
    class Unique
      include SolidJobs::Task
      task_options channel: CHANNEL, unique: {by: :arguments, while: :queued}

      def execute_task(*) = nil
    end

    # Loads enqueue_unique.lua on the warm-up channel, so the measured
    # unique enqueue is a steady-state call into an empty channel.
    class UniqueWarmup
      include SolidJobs::Task
      task_options channel: "warmup", unique: {by: :arguments, while: :queued}

      def execute_task(*) = nil
    end

    # Concurrency limited (docs/flow-control.md): one key for the task, one
    # job at a time.
    class Limited
      include SolidJobs::Task
      task_options channel: CHANNEL, concurrency: {limit: 1}

      def execute_task(*) = nil
    end

    # Rate limited (decision 42): one key for the task, one start per second.
    # The start slack is the most allowed (the default, 50 ms here, was
    # missed on a loaded host: the job was handed back and claimed again,
    # 7 calls instead of 2): the counts are of a job started in time.
    class Rated
      include SolidJobs::Task
      task_options channel: CHANNEL, rate: {limit: 1, per: 1, slack: 1}

      def execute_task(*) = nil
    end

    # A job that ends when the scenario lets it (`Paced.let_one_end`), not
    # after a time: back_to_back orders each completion after the claim it
    # must follow on that claim's visible effect. 20 ms sleeps raced the
    # node's fetcher on a loaded host (a late claim carries two completions
    # instead of one).
    class Paced
      include SolidJobs::Task
      task_options channel: CHANNEL

      LOCK = Mutex.new
      TURN = ConditionVariable.new
      @permits = 0

      class << self
        def let_one_end
          LOCK.synchronize do
            @permits += 1
            TURN.broadcast
          end
        end

        def reset = LOCK.synchronize { @permits = 0 }

        # Waits for a permit; the bound only keeps a broken scenario from
        # holding the node's worker past its stop.
        def take_permit(timeout)
          deadline = CommandCounts.now + timeout
          LOCK.synchronize do
            until @permits.positive?
              left = deadline - CommandCounts.now
              raise CommandCounts::Error, "Paced job not let through within #{timeout}s" unless left.positive?

              TURN.wait(LOCK, left)
            end
            @permits -= 1
          end
        end
      end

      def execute_task(*) = self.class.take_permit(CommandCounts::Meter::TIMEOUT)
    end

    # Scheduled onto a channel no measured node serves: a promotion ends with
    # the job ready in its list, not run.
    class Later
      include SolidJobs::Task
      task_options channel: "later"

      def execute_task(*) = nil
    end
  end

  # The six SolidJobs operations whose commands and round trips
  # test/command_counts_test.rb asserts and `rake benchmark:commands` prints.
  #
  # Every operation runs in a namespace of its own, on connections that are
  # already open and scripts already loaded: the steady state, not a first
  # call's connect (redis-rs's CLIENT SETINFO) or script load.
  #
  # A node is a SolidJobs::Conductor in this process with one worker thread
  # and a fixed prefetch window of 2, the adaptive window's starting size
  # for one worker. Any window of 2 or more costs the same here (the claim's
  # second RPOP finds the list empty), but the adaptive one shrinks to 1
  # after a job slower than 10 ms, as a warm-up job on a busy machine can
  # be, and the claim then pops once: fixed, the count cannot vary. Its
  # heartbeat interval is an hour unless the operation needs a heartbeat, so
  # an idle node sends nothing: its fetcher waits for the doorbell, its
  # heartbeat thread for the next due job.
  class SolidJobsScenarios
    OPERATIONS = %i[enqueue enqueue_many worker_turn retry scheduled_promotion recovery unique_enqueue
                    unique_duplicate pause_resume limited_enqueue limited_turn limited_blocked_turn priority_enqueue
                    priority_turn rate_turn rate_throttled_turn back_to_back].freeze
    TITLES = {
      enqueue: "Task.enqueue (one job, empty channel)",
      enqueue_many: "Task.enqueue_many (100 jobs)",
      worker_turn: "worker turn: idle node takes, runs and acks one job",
      retry: "retry: the job raises and is scheduled for retry",
      scheduled_promotion: "scheduled promotion: enqueue_after, then the job becomes ready",
      recovery: "recovery: a live node requeues a dead node's claim and runs it",
      unique_enqueue: "unique Task.enqueue (one job, its lock free, empty channel)",
      unique_duplicate: "unique Task.enqueue of a duplicate (the lock's job is live)",
      pause_resume: "pause a channel, a job arrives (the idle node skips it), resume: the node runs it",
      limited_enqueue: "concurrency-limited Task.enqueue (one job, empty channel)",
      limited_turn: "worker turn, concurrency-limited job, its slot free",
      limited_blocked_turn: "two jobs of one key at limit 1: one blocked, moved back by the ack, run",
      priority_enqueue: "Task.set(priority: 2).enqueue (one job, empty level list)",
      priority_turn: "worker turn, a priority-2 job (its channel has a level in use)",
      rate_turn: "worker turn, rate-limited job, its key under the rate",
      rate_throttled_turn: "two jobs of one key at 1 per second: one throttled, woken by a promotion, run",
      back_to_back: "three 20 ms jobs back to back on one worker (prefetch 1): each next claim carries the last completion"
    }.freeze
    # What each connection of a producer or a node sends first.
    ROLES = {
      "enqueue" => "producer", "schedule" => "producer", "claim" => "fetcher", "ack_claim" => "fetcher", "ack" => "acker",
      "promote" => "heartbeat thread", "heartbeat" => "node pool", "SUBSCRIBE" => "subscriber"
    }.freeze
    IDLE_HEARTBEAT = 3600
    # Recovery needs one heartbeat of the live node inside the window: long
    # enough for the node to boot and warm up before it, short for the run.
    RECOVERY_HEARTBEAT = 3.0
    # A dead node's heartbeat key lives this long after its claim.
    DEAD_NODE_TTL = 0.3
    ATTEMPTS = 3
    # enqueue_after delay of the timer-path runs: long enough that the
    # promote the `planned` doorbell triggers at once never finds it due.
    TIMER_DELAY = 1.0

    def initialize(redis_port, quiet: 0.5)
      @redis_port = redis_port
      @quiet = quiet
    end

    # [OperationCount] for `operations`, in order.
    def run(operations = OPERATIONS)
      unknown = operations - OPERATIONS
      raise Error, "unknown operation(s) #{unknown.inspect}; known: #{OPERATIONS.inspect}" unless unknown.empty?

      metered { operations.map { |operation| send(operation) } }
    end

    # The scheduled promotion left to the heartbeat thread's own timer,
    # `runs` times: how many promote calls the due time costs, which the
    # timer's slack makes vary (see #scheduled_promotion).
    def timer_promotions(runs, delay: TIMER_DELAY)
      metered { Array.new(runs) { timer_promotion(delay) } }
    end

    private

    def metered
      Meter.open(@redis_port, roles: ROLES, quiet: @quiet) do |meter|
        @meter = meter
        @control = meter.control
        yield
      end
    end

    def measure(key, &block)
      @meter.measure(key, TITLES.fetch(key), &block).tap { |count| refuse_unknown_scripts(count) }
    end

    # A script Redis knows by a SHA that no file under crates/solid_core/lua
    # gives (or a SCRIPT LOAD inside a window) means the extension was built
    # from other sources than the ones read here: its counts would describe
    # code that is not in the tree.
    def refuse_unknown_scripts(count)
      unknown = count.links.flat_map(&:calls).map(&:first).grep(/\A(EVALSHA|EVAL|SCRIPT)\b/)
      return if unknown.empty?

      raise Error, "#{count.title} ran #{unknown.uniq.join(", ")}, unknown to crates/solid_core/lua: " \
                   "lib/solid_jobs/#{RUBY_VERSION[/\A\d+\.\d+/]}/solid_jobs.so is not built from these sources " \
                   "(run `bundle exec rake compile`)"
    end

    # --- the operations ---------------------------------------------------

    # One enqueue.lua call; its channel starts empty, so it rings `ready`.
    def enqueue
      producer
      measure(:enqueue) { Tasks::Noop.enqueue(1) && nil }
    end

    # One enqueue_unique.lua call that takes the lock and writes the job.
    def unique_enqueue
      producer
      Tasks::UniqueWarmup.enqueue(0)
      measure(:unique_enqueue) { Tasks::Unique.enqueue(1) && nil }
    end

    # One enqueue_unique.lua call that finds the lock held by a live job.
    def unique_duplicate
      producer
      Tasks::UniqueWarmup.enqueue(0)
      Tasks::Unique.enqueue(2)
      measure(:unique_duplicate) { Tasks::Unique.enqueue(2) && nil }
    end

    # enqueue.lua, as a plain enqueue: the limit is in the envelope's meta.
    def limited_enqueue
      producer
      measure(:limited_enqueue) { Tasks::Limited.enqueue(1) && nil }
    end

    # A worker turn whose job takes a slot at claim and frees it at ack.
    def limited_turn
      with_node do
        measure(:limited_turn) do
          push_limited_directly(1)
          processed(2)
        end
      end
    end

    # Two jobs of one key (limit 1) in one push: the claim takes the first
    # and sets the second aside (blocked); the first's ack releases the slot
    # and moves the second back, ringing `ready`; the fetcher claims it.
    def limited_blocked_turn
      with_node do
        measure(:limited_blocked_turn) do
          push_limited_directly(2)
          processed(3)
        end
      end
    end

    # enqueue.lua for the route `name:2`: a plain enqueue plus the SETRANGE
    # that marks level 2 in use in the channel's flow string.
    def priority_enqueue
      producer
      measure(:priority_enqueue) { Tasks::Noop.set(priority: 2).enqueue(1) && nil }
    end

    # A worker turn whose job waits in level 2: the claim reads the level
    # from the flow string its MGET already fetches.
    def priority_turn
      with_node do
        measure(:priority_turn) do
          push_directly(Tasks::Noop, priority: 2)
          processed(2)
        end
      end
    end

    # A worker turn whose job is admitted by its key's rate log.
    def rate_turn
      with_node do
        measure(:rate_turn) do
          push_rated_directly(1)
          processed(2)
        end
      end
    end

    # Two jobs of one key (1 per second) in one push: the claim admits the
    # first and throttles the second, ringing `throttled`; the heartbeat
    # thread's promotion finds it not yet due and sleeps until its wake,
    # then moves it back (ringing `ready`); the fetcher claims it.
    def rate_throttled_turn
      with_node do
        measure(:rate_throttled_turn) do
          push_rated_directly(2)
          processed(3)
        end
      end
    end

    def enqueue_many
      producer
      measure(:enqueue_many) { Tasks::Noop.enqueue_many(Array.new(100) { |i| [i] }) && nil }
    end

    # The job is pushed on a direct connection (not counted); its doorbell
    # wakes the node: claim (the job; fewer than asked for, so the fetcher
    # then waits), ack.
    def worker_turn
      with_node do
        measure(:worker_turn) do
          push_directly(Tasks::Noop)
          processed(2)
        end
      end
    end

    # Three jobs in one push, one worker, a window of one (decision 51): the
    # fetcher claims the first, then the second as the first starts; from
    # then on each take refills the window with one ack_claim.lua call that
    # carries the completion just made (the third job, then an empty claim
    # that finds the channel drained), and the acker writes the last
    # completion, which no claim follows. Two calls per job before.
    # Each job ends only once the claim before it is visible in Redis, so
    # the order is the same on a loaded host.
    def back_to_back
      Tasks::Paced.reset
      with_node(prefetch: 1) do
        measure(:back_to_back) do
          push_many_directly(Tasks::Paced, 3)
          channel = key("channel:#{Tasks::CHANNEL}")
          @meter.wait_until("the second claim (the first job started)") { @control.llen(channel) == 1 }
          Tasks::Paced.let_one_end
          @meter.wait_until("the claim carrying the first completion") { @control.llen(channel).zero? }
          Tasks::Paced.let_one_end
          @meter.wait_until("the claim carrying the second completion", &processed(3))
          Tasks::Paced.let_one_end
          processed(4)
        end
      end
    end

    # claim, record_failure, retry (its `planned` doorbell wakes the
    # heartbeat thread: one promote, nothing due yet).
    def retry
      with_node do
        measure(:retry) do
          push_directly(Tasks::Failing)
          -> { @control.get(key("metric:failed")).to_i == 1 && @control.zcard(key("retrying")) == 1 }
        end
      end
    end

    # enqueue_after (schedule.lua) rings `planned`; the node's heartbeat
    # thread promotes at once, finding nothing due, and sleeps until the due
    # time, an hour away. Time is then moved forward: the member's score is
    # set to now and `planned` is rung again on a direct connection, which
    # wakes the heartbeat thread exactly as its timer would, minus the
    # timer's slack (it can fire a promote-duration early and then promote
    # twice). The promote moves the job and rings `ready` on the job's
    # channel's doorbell, which the node, serving another channel, does not
    # hear: its fetcher sleeps on (decision 50).
    def scheduled_promotion
      with_node(producer: true) do
        measure(:scheduled_promotion) do
          Tasks::Later.enqueue_after(3600, 1)
          @meter.wait_until_quiet
          bring_planned_jobs_forward
          -> { @control.llen(key("channel:later")) == 1 }
        end
      end
    end

    # Channels.pause; a job pushed on a direct connection rings the doorbell
    # and the idle node's claim skips the paused channel (the job stays);
    # Channels.resume rings the doorbell again (the channel holds a job) and
    # the node claims, runs and acks it as in worker_turn.
    def pause_resume
      with_node(producer: true) do
        measure(:pause_resume) do
          SolidJobs::Channels.pause(Tasks::CHANNEL)
          push_directly(Tasks::Noop)
          @meter.wait_until_quiet
          SolidJobs::Channels.resume(Tasks::CHANNEL)
          processed(2)
        end
      end
    end

    def timer_promotion(delay)
      with_node(producer: true) do
        measure(:scheduled_promotion) do
          Tasks::Later.enqueue_after(delay, 1)
          -> { @control.llen(key("channel:later")) == 1 }
        end
      end
    end

    # A dead node (an adapter claim whose heartbeat key expired) holds a
    # job; the live node's next heartbeat finds it dead and requeues its
    # claim, the doorbell wakes the fetcher, the job runs and is acked.
    # The window must hold exactly one heartbeat of the live node; a run in
    # which the machine was too slow for that is measured again.
    def recovery
      count = nil
      ATTEMPTS.times do
        fresh_namespace
        leave_a_dead_claim
        count = with_node(heartbeat: RECOVERY_HEARTBEAT, fresh: false) { measure(:recovery) { processed(2) } }
        return count if count.script_calls("heartbeat") == 1
      end
      count
    end

    # --- scene setting ----------------------------------------------------

    def fresh_namespace
      @meter.ignore_existing_connections
      @namespace = "cmd#{SecureRandom.hex(4)}"
      SolidJobs.configure do |c|
        c.redis_url = @meter.proxy.url
        c.namespace = @namespace
      end
    end

    def key(suffix) = "#{@namespace}:#{suffix}"

    # A fresh namespace and a producer whose pooled connection is open.
    def producer
      fresh_namespace
      Tasks::Warmup.enqueue(0)
    end

    # Runs the block with a node serving CHANNEL, after one warm-up job has
    # opened every connection the node uses; stops the node after.
    # `fresh: false` keeps the namespace the caller has set a scene in.
    def with_node(heartbeat: IDLE_HEARTBEAT, producer: false, fresh: true, prefetch: 2)
      if producer
        self.producer
      elsif fresh
        fresh_namespace
      end
      node = SolidJobs::Conductor.new(node_config(heartbeat, prefetch)).start
      push_directly(Tasks::Noop)
      @meter.wait_until("the warm-up job", &processed(1))
      settle_doorbell
      yield
    ensure
      node&.stop(timeout: 5)
    end

    # A subscription, the node's first too, rings every bell, so the
    # node's next promotion also wakes throttled keys once (decision 42:
    # rings may have been missed before it). Whether that subscription came
    # before or after the node's first promotion is a race; here, outside
    # what is measured, the node is made to promote once after it.
    def settle_doorbell
      @meter.wait_until("the doorbell subscription") do
        Array(@control.pubsub("numsub", key("doorbell"))).last.to_i >= 1
      end
      @control.publish(key("doorbell"), "planned")
      @meter.wait_until_quiet
    end

    def node_config(heartbeat, prefetch)
      SolidJobs::Configuration.new.tap do |c|
        c.redis_url = @meter.proxy.url
        c.namespace = @namespace
        c.channels = [Tasks::CHANNEL]
        c.concurrency = 1
        c.prefetch = prefetch
        c.execution_mode = :thread
        c.heartbeat_interval = heartbeat
        c.recovery_delay = heartbeat * 2
        c.shutdown_timeout = 5
      end
    end

    # Pushes a job on a connection that bypasses the proxy: setting the
    # scene, not part of what is measured.
    def push_directly(task, priority: 5)
      client = (@direct_clients ||= {})[@namespace] ||= SolidJobs::Native::Client.new(@meter.direct_url, @namespace)
      options = task.solid_jobs_options
      client.push(task.name, [], SolidJobs::Publisher.route(options.fetch(:channel), priority), options.fetch(:max_failures),
                  nil)
    end

    # `count` jobs of `task` in one push, as push_directly.
    def push_many_directly(task, count)
      client = (@direct_clients ||= {})[@namespace] ||= SolidJobs::Native::Client.new(@meter.direct_url, @namespace)
      options = task.solid_jobs_options
      client.push_many(task.name, Array.new(count) { [] }, SolidJobs::Publisher.route(options.fetch(:channel), 5),
                       options.fetch(:max_failures), nil)
    end

    # Tasks::Limited's jobs, pushed like push_directly, with their flow meta.
    def push_limited_directly(count)
      client = (@direct_clients ||= {})[@namespace] ||= SolidJobs::Native::Client.new(@meter.direct_url, @namespace)
      task = Tasks::Limited
      options = task.solid_jobs_options
      client.push_limited(task.name, Array.new(count) { [] }, options.fetch(:channel), options.fetch(:max_failures), nil,
                          [task.name, options.fetch(:concurrency).fetch(:limit), Array.new(count)])
    end

    # Tasks::Rated's jobs, pushed like push_directly, with their flow meta.
    def push_rated_directly(count)
      client = (@direct_clients ||= {})[@namespace] ||= SolidJobs::Native::Client.new(@meter.direct_url, @namespace)
      task = Tasks::Rated
      options = task.solid_jobs_options
      rate = options.fetch(:rate)
      client.push_limited(task.name, Array.new(count) { [] }, options.fetch(:channel), options.fetch(:max_failures), nil,
                          [nil, nil, nil, [task.name, rate.fetch(:limit), rate.fetch(:window_ms), rate.fetch(:slack_ms),
                                           Array.new(count)]])
    end

    def processed(count) = -> { @control.get(key("metric:processed")).to_i >= count }

    # Moves every planned job's due time to now, and rings the doorbell the
    # way schedule.lua does for a new earliest due time.
    def bring_planned_jobs_forward
      now_ms = Process.clock_gettime(Process::CLOCK_REALTIME, :millisecond)
      @control.zrange(key("planned"), 0, -1).each { |member| @control.zadd(key("planned"), now_ms, member, xx: true) }
      @control.publish(key("doorbell"), "planned")
    end

    # Claims a job for a node that then dies: the adapter API registers a
    # node of its own for DEAD_NODE_TTL at each claim, and this one never
    # settles or heartbeats again.
    def leave_a_dead_claim
      push_directly(Tasks::Noop)
      config = SolidJobs::Configuration.new.tap do |c|
        c.namespace = @namespace
        c.recovery_delay = DEAD_NODE_TTL
      end
      dead = SolidJobs::Backends::Redis.new(:dead_node, {adapter: :solid_redis, url: @meter.direct_url}, config)
      claim = dead.claim(Tasks::CHANNEL) or raise Error, "the dead node found no job to claim"
      @meter.wait_until("the dead node's heartbeat to expire") { !@control.exists?(key("node:#{claim.reservation}")) }
    end
  end
end
