# frozen_string_literal: true

module SolidJobs
  # One worker: a loop in its own Ractor (or thread) that takes jobs from the
  # native dispatcher, runs them, and settles each one exactly once.
  #
  # A job is completed only after `execute_task` returns. A raising task is
  # recorded and handed to the FailurePolicy; it never ends the loop.
  #
  # With a custom instrumenter each job emits job.reserved, job.started and
  # job.completed (or job.failed with job.retry_scheduled or job.dead) from
  # this worker; the dispatcher journals a sample of jobs either way.
  class Worker
    # Seconds a worker waits in native code before asking again. Stop and
    # Ruby interrupts wake it at once, so this only bounds an idle wait:
    # long, so an idle node does not wake its workers for nothing.
    POLL_SECONDS = 30.0
    # Backoff while Redis is unreachable during failure handling.
    REDIS_RETRY_MIN = 0.05
    REDIS_RETRY_MAX = 2.0

    # `lane`: nil on a node without lanes, else Lanes::RACTOR or Lanes::THREAD.
    def initialize(dispatcher, worker_id, lane: nil, node_id: nil)
      @dispatcher = dispatcher
      @worker_id = worker_id
      @lane = lane
      @node_id = node_id
      @instrumenter = SolidJobs.config.instrumenter
      @instrumented = !Instrumentation.null?(@instrumenter)
      # Read once: at info, the path of a job that succeeds pays this one
      # boolean for its debug lines.
      @debug = Log.debug?
      @ractor_id = RactorCompat.current_id
    end

    def run
      @dispatcher.register_worker(@worker_id, @ractor_id)
      # What SolidJobs.stopping? asks, from the task running on this thread.
      Thread.current[:solid_jobs_dispatcher] = @dispatcher
      while (job = @lane ? @dispatcher.next_job_in(@lane, POLL_SECONDS) : @dispatcher.next_job(POLL_SECONDS)) != false
        next unless job

        begin
          emit("job.reserved", job) if @instrumented
          perform(job)
        rescue StandardError => e
          # A bug in settling must not end this worker. The job stays
          # claimed: shutdown requeues it, or recovery does.
          Log.error("worker #{@worker_id}: #{e.class}: #{e.message} while settling job #{job.id}; left claimed for requeue",
                    **log_fields(job))
          @dispatcher.abandon(job) unless job.settled?
        rescue Exception # rubocop:disable Lint/RescueException -- an interrupt (from an instrumenter, a signal) ends this worker
          # Left claimed, no longer counted in flight: shutdown requeues it
          # at once instead of waiting out the timeout for it.
          @dispatcher.abandon(job) unless job.settled?
          raise
        end
      end
      Log.debug("worker #{@worker_id} stopped", node_id: @node_id, worker_id: @worker_id)
    ensure
      @dispatcher.worker_stopped
    end

    def perform(job)
      task_class, reason, unknown = Executor.resolve(job.task)
      unless task_class
        return unknown ? postpone_unknown(job, reason) : quarantine(job, reason)
      end
      # A thread task the dispatcher was not told about (see Lanes).
      return @dispatcher.hand_over(job, Lanes::THREAD) if @lane == Lanes::RACTOR && Lanes.thread_only?(task_class)

      @dispatcher.started(job)
      started = start_event(job) if @instrumented || @debug
      begin
        Executor.execute(task_class, job.arguments, worker_id: @worker_id, job: job)
      rescue UnknownTaskError => e
        # A task that runs other code by name (the Active Job wrapper) found
        # it missing: the same rolling deploy as an unknown task.
        return postpone_unknown(job, e.message)
      rescue Exception => e # rubocop:disable Lint/RescueException -- any task failure is recorded, never fatal
        return handle_failure(job, task_class, e, started)
      end
      emit("job.completed", job, duration_ms: since(started)) if @instrumented
      @dispatcher.complete(job)
      Log.debug("finished", **log_fields(job, event: "job.completed", duration_ms: since(started))) if @debug
    end

    private

    def handle_failure(job, task_class, error, started = nil)
      message = FailureMessage.for(error, job.task)
      location = Instrumentation.location(error).to_s
      # The error's class is the app's: its name is read through Module#name.
      error_class = Reflection.class_name(error)
      failures, first_ms = with_redis(job) { @dispatcher.record_failure(job, error_class, message, location) }
      return unless failures

      if @instrumented
        emit("job.failed", job, attempt: job.attempt || failures, failures: failures, error_class: error_class,
                                error_location: location.empty? ? nil : location, duration_ms: since(started))
      end
      decision = FailurePolicy.decide(task_class, job, error, failures, first_ms)
      if decision.final?
        written = with_redis(job) do
          @dispatcher.discard(job, decision.reason, error_class, message, Array(error.backtrace).first(20), failures,
                              decision.action == :archive)
        end
        return unless written

        emit("job.dead", job, failures: failures, reason: decision.action == :archive ? "archived" : "dropped") if @instrumented
        Log.info("#{job.logged_task} #{job.id} given up after #{failures} failure(s): #{decision.reason} " \
                 "(#{error_class}: #{message})",
                 **log_fields(job, event: "job.dead", reason: decision.action == :archive ? "archived" : "dropped",
                                   failures: failures, error_class: error_class, duration_ms: since(started)))
        FailurePolicy.after_final_failure(task_class, job, error)
      else
        schedule_retry(job, decision.delay, failures)
        Log.info("#{job.logged_task} #{job.id} failed (#{error_class}: #{message}); failure #{failures}/#{job.max_failures}, " \
                 "retry in #{decision.delay.round(1)}s",
                 **log_fields(job, event: "job.failed", failures: failures, max_failures: job.max_failures,
                                   error_class: error_class, retry_in_s: decision.delay.to_f.round(3),
                                   duration_ms: since(started)))
      end
    rescue StaleClaimError => e
      Log.warn("#{job.logged_task} #{job.id}: #{e.message}", **log_fields(job))
      @dispatcher.abandon(job) unless job.settled?
    end

    # A well-formed job whose task this worker's code does not define:
    # usually a rolling deploy (producers run the new code first), so it
    # is retried on the unknown-task backoff, counted apart from the task's
    # own failures, and archived as UnknownTaskError once
    # unknown_task_retry_for has passed (FailurePolicy.decide_unknown).
    def postpone_unknown(job, reason)
      error_class = UnknownTaskError.name
      attempts, first_ms = with_redis(job) { @dispatcher.record_unknown(job, error_class, reason) }
      return unless attempts

      emit("job.failed", job, attempt: job.attempt || attempts, failures: attempts, error_class: error_class) if @instrumented
      decision = FailurePolicy.decide_unknown(attempts, first_ms)
      if decision.final?
        written = with_redis(job) { @dispatcher.discard(job, decision.reason, error_class, reason, [], attempts, true) }
        return unless written

        emit("job.dead", job, failures: attempts, reason: "archived") if @instrumented
        Log.info("#{job.logged_task} #{job.id} archived: #{decision.reason}: #{reason}",
                 **log_fields(job, event: "job.dead", reason: "archived", failures: attempts, error_class: error_class))
      else
        schedule_retry(job, decision.delay, attempts)
        Log.info("#{job.id}: #{reason}; unknown-task attempt #{attempts}, retry in #{decision.delay.round(1)}s " \
                 "(archived after unknown_task_retry_for #{SolidJobs.config.unknown_task_retry_for}s)",
                 **log_fields(job, event: "job.unknown_task", failures: attempts, error_class: error_class,
                                   retry_in_s: decision.delay.to_f.round(3)))
      end
    rescue StaleClaimError => e
      Log.warn("job #{job.id}: #{e.message}", **log_fields(job))
      @dispatcher.abandon(job) unless job.settled?
    end

    # Writes the retry; once written, the instrumenter hears when it is due.
    def schedule_retry(job, delay, failures)
      written = with_redis(job) { @dispatcher.retry(job, delay) }
      if written && @instrumented
        emit("job.retry_scheduled", job, failures: failures, retry_at_ms: Clock.now_ms + (delay * 1000).round)
      end
      written
    end

    def quarantine(job, reason)
      Log.info("quarantining job #{job.id}: #{reason}", **log_fields(job, event: "job.dead", reason: "quarantined"))
      written = with_redis(job) { @dispatcher.quarantine(job, reason) }
      emit("job.dead", job, failures: 0, reason: "quarantined") if written && @instrumented
    rescue StaleClaimError => e
      Log.warn("job #{job.id}: #{e.message}", **log_fields(job))
    end

    # Monotonic start of the task, after job.started was emitted and logged.
    def start_event(job)
      latency_ms = [Clock.now_ms - job.queued_ms, 0].max
      emit("job.started", job, latency_ms: latency_ms) if @instrumented
      Log.debug("started", **log_fields(job, event: "job.started", latency_ms: latency_ms)) if @debug
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end

    # What a job's log lines name: this worker and node, the job, its task
    # (an Active Job job's own class, read from the envelope by the native
    # side without converting any argument), its channel, then `extra`.
    def log_fields(job, **extra)
      {node_id: @node_id, worker_id: @worker_id, job_id: job.id, task: job.logged_task, channel: job.channel,
       attempt: job.attempt, **extra}
    end

    def since(started)
      started && ((Process.clock_gettime(Process::CLOCK_MONOTONIC) - started) * 1000).round(3)
    end

    # One lifecycle event for the instrumenter: correlation identifiers,
    # a timestamp and `extra` (durations, counts, error class). Never
    # arguments. The job's identifiers are read once per job (frozen, so
    # every event can share them).
    def emit(name, job, **extra)
      unless @ids_job.equal?(job)
        @ids_job = job
        @ids = [job.id.freeze, job.task.freeze, job.channel.freeze, job.attempt, job.token].freeze
      end
      id, task, channel, attempt, token = @ids
      payload = {job_id: id, task: task, channel: channel, attempt: attempt, node_id: @node_id,
                 ractor_id: @ractor_id, worker_id: @worker_id, reservation_id: token, at_ms: Clock.now_ms}
      Instrumentation.emit(@instrumenter, name, extra.empty? ? payload : payload.merge!(extra))
    end

    # Retries a settling write while Redis is unreachable. If the node stops
    # first, the job is left claimed: shutdown requeues it, or recovery does.
    # Returns true once the write went through.
    def with_redis(job)
      delay = REDIS_RETRY_MIN
      begin
        yield || true
      rescue ConnectionError => e
        if @dispatcher.stopping?
          Log.warn("job #{job.id} left claimed for requeue: #{e.message}", **log_fields(job))
          @dispatcher.abandon(job) unless job.settled?
          return nil
        end
        sleep(delay)
        delay = [delay * 2, REDIS_RETRY_MAX].min
        retry
      end
    end
  end

  # Failure messages that tell the operator what to do.
  module FailureMessage
    THREAD_ADVICE = "give it `task_options execution: :thread` (it then runs on the node's thread workers), " \
                    "or set execution_mode = :thread (or --execution-mode thread) for this worker"

    module_function

    def for(error, task)
      message = error.message.to_s
      case error
      when Ractor::IsolationError
        "#{message} -- task #{task} cannot run inside a Ractor (it touched non-shareable state); #{THREAD_ADVICE}"
      when Ractor::UnsafeError
        "#{message} -- task #{task} cannot run inside a Ractor (it called a C method that is not Ractor-safe); " \
          "#{THREAD_ADVICE}"
      when StandardError
        message
      else
        "#{message} (#{Reflection.class_name(error)} is not a StandardError; the job was still recorded as failed)"
      end
    end
  end
end
