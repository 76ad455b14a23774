# frozen_string_literal: true

module SolidJobs
  # Turns `Task.enqueue` calls into envelopes in Redis.
  #
  # Without publication interceptors, arguments go straight to the native
  # client, which validates, encodes and writes them in one round trip.
  # With interceptors, each envelope is built first (as a Hash), passed
  # through the chain, and the surviving envelopes are written together.
  #
  # With a custom instrumenter, job.enqueued and job.journaled are emitted
  # before any worker can reserve the job: on Redis the envelopes are
  # written behind the publication barrier (invisible), the events are
  # emitted, then the barrier is lifted: a second round trip per
  # publication call, paid only with an instrumenter. A barrier whose
  # publisher dies expires (publication_barrier_ttl) and a node's heartbeat
  # releases the jobs.
  # What enqueueing a unique task returns (an Array of ids, one per
  # argument list): a duplicate's entry is the id of the live job holding
  # its lock, and `duplicates` lists the indexes of those entries, so
  # `enqueue_many` tells which argument lists were written. `duplicates`
  # comes from the native client in ascending order, computed in one pass,
  # so `duplicate?` is a binary search: asking about every index of a
  # 1,000-job batch stays linear-logarithmic however many are duplicates.
  class Enqueued < Array
    attr_reader :duplicates

    def initialize(ids, duplicates)
      super(ids)
      @duplicates = duplicates.freeze
    end

    def duplicate?(index) = index.is_a?(Integer) && @duplicates.bsearch { |i| i >= index } == index
  end

  module Publisher
    # What publication interceptors receive. `envelope` is the Hash that will
    # be written; an interceptor may change it or not yield to skip the job.
    class Publication
      attr_reader :task_class, :envelope, :due_ms

      def initialize(task_class, envelope, due_ms)
        @task_class = task_class
        @envelope = envelope
        @due_ms = due_ms
      end
    end

    module_function

    # Returns the ids of the written jobs (nil where an interceptor skipped one).
    # `channel` replaces the task's own (Active Job's queue_name, the warm
    # pool's target task), `max_failures` and `priority` likewise.
    def publish(task_class, argument_lists, due_ms: nil, channel: nil, max_failures: nil, priority: nil)
      task = Reflection.name(task_class) or raise ArgumentError, "an anonymous class cannot be a task: give it a constant name"
      options = task_class.solid_jobs_options
      channel ||= options.fetch(:channel)
      max_failures ||= options.fetch(:max_failures)
      priority = options.fetch(:priority, DEFAULT_PRIORITY) if priority.nil?
      return Testing.publish(task_class, argument_lists, route(channel, priority), max_failures, due_ms) if Testing.active?

      routing = SolidJobs.routing
      backend = routing.backend_for(channel)
      check_supported(backend, task, options)
      refuse_priority(backend, task, priority) unless priority == DEFAULT_PRIORITY
      # The native client writes to the route: the channel, or `name:p`
      # (that level's list) for another priority; routing went by channel.
      channel = route(channel, priority)
      flow = limited(backend, task_class, task, options, argument_lists) if options[:concurrency] || options[:rate]
      if (unique = options[:unique])
        job = {task: task, channel: channel, max_failures: max_failures, due_ms: due_ms, mode: unique[:while].to_s,
               for_ms: unique[:for_ms] || 0, flow: flow}
        return publish_unique(backend, task_class, argument_lists, unique[:by], job)
      end

      config = SolidJobs.config
      chain = config.publish_interceptors
      instrumenter = config.instrumenter
      observed = !Instrumentation.null?(instrumenter)
      if chain.empty? && !observed
        return backend.push(task, argument_lists, channel, max_failures, due_ms) unless flow

        job = {task: task, channel: channel, max_failures: max_failures, due_ms: due_ms, flow: flow}
        return backend.push_limited(job, argument_lists)
      end

      envelopes = argument_lists.map { |args| Native::Client.build(task, args, channel, max_failures, due_ms) }
      envelopes = with_flow(envelopes, flow) if flow
      kept = chain.empty? ? envelopes : intercepted(task_class, envelopes, chain, due_ms)
      # Re-applied after the chain: an interceptor may change a job's data,
      # not drop its limit (the key was computed from the arguments as
      # enqueued, before the chain).
      kept = with_flow(kept, flow) if flow && !chain.empty?
      kept.compact.group_by { |e| routing.backend_for(e["channel"]) }.each do |b, list|
        refuse_limited(b, task, options) if flow
        refuse_priority(b, task, priority) unless priority == DEFAULT_PRIORITY
        observed ? publish_observed(b, list, due_ms, instrumenter) : b.push_envelopes(list, due_ms)
      end
      kept.map { |envelope| envelope && envelope["id"] }
    end

    # A limited task's flow (docs/flow-control.md): [group, limit, [key
    # material, ...]] of its concurrency limit (all nil without one), then
    # [group, limit, window_ms, slack_ms, [key material, ...]] of its rate limit or
    # nil. The `key:` Procs run here, in the producer, on each job's
    # arguments; without one, the group has one key (nil).
    def limited(backend, task_class, task, options, argument_lists)
      refuse_limited(backend, task, options)
      concurrency = options[:concurrency]
      rate = options[:rate]
      flow = if concurrency
               [concurrency[:group] || task, concurrency[:limit],
                materials(task_class, "concurrency", concurrency[:key], argument_lists)]
             else
               [nil, nil, nil]
             end
      return flow unless rate

      flow << [rate[:group] || task, rate[:limit], rate[:window_ms], rate[:slack_ms],
               materials(task_class, "rate", rate[:key], argument_lists)]
    end

    def materials(task_class, what, key, argument_lists)
      argument_lists.map do |arguments|
        next nil unless key

        begin
          key.call(*arguments)
        rescue ArgumentError => e
          raise ArgumentError, "#{task_class}'s #{what} key: cannot take #{arguments.size} argument(s) " \
                               "(#{e.message}); nothing was enqueued"
        end
      end
    end

    DEFAULT_PRIORITY = 5

    # Priorities 0..9 (docs/flow-control.md, "Priorities"): 0 runs first,
    # 9 last. Checked here too: `Task.set` and Active Job pass one per call.
    def route(channel, priority)
      unless priority.is_a?(Integer) && priority.between?(0, 9)
        raise ArgumentError, "priority must be an Integer from 0 (runs first) to 9 (runs last), got #{priority.inspect}"
      end

      priority == DEFAULT_PRIORITY ? channel : "#{channel}:#{priority}"
    end

    def refuse_priority(backend, task, priority)
      return if backend.supports?(:priority)

      raise Backends::NotSupported, "#{task} was enqueued with priority #{priority}, which the #{backend.name.inspect} " \
                                    "backend cannot honor; route the channel to Redis (docs/flow-control.md)"
    end

    def refuse_limited(backend, task, options)
      if options[:concurrency] && !backend.supports?(:concurrency_limits)
        raise Backends::NotSupported, "#{task} has a concurrency limit, which the #{backend.name.inspect} backend " \
                                      "cannot honor; route the channel to Redis (docs/flow-control.md)"
      end
      return unless options[:rate] && !backend.supports?(:rate_limits)

      raise Backends::NotSupported, "#{task} has a rate limit, which the #{backend.name.inspect} backend cannot " \
                                    "honor; route the channel to Redis (docs/flow-control.md)"
    end

    def with_flow(envelopes, flow)
      envelopes.each_with_index.map { |e, i| e && Native::Client.with_flow(e, flow, i) }
    end

    def intercepted(task_class, envelopes, chain, due_ms)
      envelopes.map do |envelope|
        publication = Publication.new(task_class, envelope, due_ms)
        written = nil
        chain.invoke(publication) { written = publication.envelope }
        written
      end
    end

    # job.enqueued, the write, job.journaled, then the job becomes
    # reservable. Backends without a barrier (SolidEngine) make the job
    # ready with the write: there a worker may reserve it before
    # job.journaled is emitted (docs/observability.md).
    def publish_observed(backend, envelopes, due_ms, instrumenter)
      source = backend.respond_to?(:telemetry_source) ? backend.telemetry_source : nil
      payloads = envelopes.map do |e|
        {job_id: e["id"], task: e["task"], channel: e["channel"], source: source, due_ms: due_ms, at_ms: Clock.now_ms}
      end
      payloads.each { |p| Instrumentation.emit(instrumenter, "job.enqueued", p) }
      if backend.respond_to?(:hold_envelopes)
        held = backend.hold_envelopes(envelopes, due_ms)
        payloads.each { |p| Instrumentation.emit(instrumenter, "job.journaled", p.merge(at_ms: Clock.now_ms)) }
        backend.release_held(held)
      else
        backend.push_envelopes(envelopes, due_ms)
        payloads.each { |p| Instrumentation.emit(instrumenter, "job.journaled", p.merge(at_ms: Clock.now_ms)) }
      end
    end

    # A unique task's jobs: written with their locks, or the live holder's
    # id in their place (docs/unique.md). Returns Enqueued: the ids, and
    # which argument lists were duplicates.
    def publish_unique(backend, task_class, argument_lists, by, job)
      task = job[:task]
      unless backend.supports?(:unique)
        raise Backends::NotSupported, "#{task} is unique, which the #{backend.name.inspect} backend cannot honor " \
                                      "(its push is idempotent by job id only, not by key); route the channel to Redis"
      end
      config = SolidJobs.config
      unless config.publish_interceptors.empty? && Instrumentation.null?(config.instrumenter)
        raise Backends::NotSupported, "#{task} is unique: unique tasks are not yet published through publication " \
                                      "interceptors or a custom instrumenter's publication barrier (docs/unique.md)"
      end
      materials = argument_lists.map { |arguments| unique_material(task_class, by, arguments) }
      Enqueued.new(*backend.push_unique(job, argument_lists, materials))
    end

    # The key material of one job: what `by:` names, made JSON by the native
    # client (refused with the path of a value that is not JSON-native).
    def unique_material(task_class, by, arguments)
      case by
      when :arguments then arguments
      when String then by
      else
        begin
          by.call(*arguments)
        rescue ArgumentError => e
          raise ArgumentError, "#{task_class}'s unique by: cannot take #{arguments.size} argument(s) (#{e.message}); " \
                               "nothing was enqueued"
        end
      end
    end

    # retry_within needs the time of the first failure, which only the
    # Redis backend records: refuse at enqueue rather than ignore it later.
    def check_supported(backend, task, options)
      return unless options[:retry_within] && !backend.is_a?(Backends::Redis)

      raise Backends::NotSupported, "#{task} uses retry_within, which the #{backend.name.inspect} backend cannot honor " \
                                    "(it does not record failure times); remove it or route the channel to Redis"
    end
  end
end
