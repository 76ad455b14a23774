# frozen_string_literal: true

require "json"

module SolidJobs
  # One thread in the main Ractor of a worker node that
  #
  # - observes every `observation_interval`: the process (ProcessObservation),
  #   each worker (state and current job, tracked natively by the workers)
  #   and Redis (derived from the operations the node performs anyway);
  #   the dispatcher writes them to `observations:<node>` and the journal;
  # - acts on control requests the heartbeat took from the node's mailbox
  #   (pause, resume, backtraces, shutdown);
  # - hands events that happen on native threads (job.acknowledged,
  #   job.recovered) to a custom instrumenter, along with the observations.
  #
  # It sends no Redis command of its own.
  class NodeMonitor
    # How long backtraces stay readable after a request.
    BACKTRACES_TTL_MS = 10 * 60 * 1000
    ACTIONS = %w[pause resume backtraces shutdown].freeze
    # Why a Ractor node's backtraces list no worker stacks.
    RACTOR_BACKTRACES_NOTE = "worker Ractors cannot be inspected from another Ractor: their state and current job are shown"

    def initialize(dispatcher, config, node_id:, description:, on_shutdown:)
      @dispatcher = dispatcher
      @config = config
      @node_id = node_id
      @description = description
      @on_shutdown = on_shutdown
      @instrumenter = config.instrumenter
      @instrumented = !Instrumentation.null?(@instrumenter)
      @process = ProcessObservation.new
      @stopping = false
    end

    def start
      @thread = Thread.new { run }.tap { |t| t.name = "solid-jobs-monitor" }
      self
    end

    # Stops the thread and records a last observation (workers stopping or
    # stopped), which the dispatcher's shutdown writes.
    def stop
      @stopping = true
      @dispatcher.wake_monitor
      @thread&.join(5)
      observe("stopping")
    end

    def run
      next_at = clock
      until @stopping
        if clock >= next_at
          observe
          next_at = clock + @config.observation_interval
        end
        # Sleeps until the next observation unless a request or an event
        # arrives (or #stop wakes it): an idle node's monitor wakes once
        # per observation interval.
        requests, events = @dispatcher.notices([next_at - clock, 0].max)
        requests.each { |raw| act(raw) }
        events.each { |name, payload| emit(name, payload) } if @instrumented
      end
    rescue StandardError => e
      Log.error("node monitor stopped: #{e.class}: #{e.message} (observations and control requests pause until restart)")
    end

    def observe(state = nil)
      process = @process.read
      node = @description.merge("state" => state || (@dispatcher.paused? ? "paused" : "running"),
                                "observation_interval_ms" => (@config.observation_interval * 1000).round)
      ractors, redis = @dispatcher.observe(JSON.generate(node), JSON.generate(process))
      return unless @instrumented

      emit("process.observed", symbolize(process).merge(node_id: @node_id))
      JSON.parse(ractors, symbolize_names: true).each { |r| emit("ractor.observed", r.merge(node_id: @node_id)) }
      emit("redis.observed", JSON.parse(redis, symbolize_names: true).merge(node_id: @node_id))
    rescue StandardError => e
      Log.warn("observation failed: #{e.class}: #{e.message}")
    end

    # One control request (a JSON object with "action" and "id").
    def act(raw)
      request = JSON.parse(raw)
      action = request["action"].to_s
      unless ACTIONS.include?(action)
        Log.warn("ignored control request with unknown action #{action.inspect}")
        return
      end
      Log.info("control request #{request["id"]}: #{action}")
      @dispatcher.journal_note("node.control", JSON.generate({"action" => action, "request_id" => request["id"]}))
      case action
      when "pause" then @dispatcher.pause
      when "resume" then @dispatcher.resume
      when "backtraces" then @dispatcher.write_backtraces(JSON.generate(backtraces(request["id"])), BACKTRACES_TTL_MS)
      when "shutdown" then @on_shutdown.call
      end
      observe if %w[pause resume].include?(action) # show the new state at once
    rescue JSON::ParserError => e
      Log.warn("ignored a control request that is not JSON: #{e.message}")
    end

    # Threads of the main Ractor with their backtraces; worker Ractors
    # cannot be inspected from here, so for them what is known: state and
    # current job (in thread mode the workers are among the threads).
    def backtraces(request_id)
      {
        "node_id" => @node_id, "request_id" => request_id, "at_ms" => Clock.now_ms, "pid" => Process.pid,
        "execution_mode" => @config.execution_mode.to_s,
        "threads" => Thread.list.map do |t|
          {"name" => t.name, "status" => t.status.to_s, "backtrace" => Array(t.backtrace).first(40)}
        end,
        "workers" => JSON.parse(@dispatcher.worker_states),
        "note" => @config.execution_mode == :ractor ? RACTOR_BACKTRACES_NOTE : nil
      }
    end

    private

    def emit(name, payload) = Instrumentation.emit(@instrumenter, name, payload)
    def clock = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    def symbolize(hash) = hash.transform_keys(&:to_sym)
  end
end
