# frozen_string_literal: true

module SolidJobs
  # Decides what happens to a job whose task raised (docs/reliability.md).
  #
  # 1. The task's `retry_delay` block, if any, is asked first: `:drop` or
  #    `:archive` give the job up now; seconds choose the next delay; nil
  #    means the default. A block that raises or returns anything else is
  #    logged and treated as nil.
  # 2. An error that fails the same way on every attempt in a Ractor
  #    (RACTOR_DETERMINISTIC) archives the job now, unless retry_delay
  #    chose a delay.
  # 3. A job that has failed `max_failures` times, or whose first failure was
  #    `retry_within` seconds ago or more, is archived.
  # 4. Otherwise it is retried after the chosen delay, by default the native
  #    capped exponential backoff with equal jitter.
  #
  # A job whose task the worker does not know is not a failure of the task:
  # `decide_unknown` retries it on a short backoff of its own for
  # `unknown_task_retry_for` seconds, then archives it.
  module FailurePolicy
    Decision = Struct.new(:action, :delay, :reason) do
      def final? = action != :retry
    end

    # Raised by a task touching state a Ractor cannot share (a mutable
    # constant, a global, a class-level cache) or calling a C method that is
    # not Ractor-safe: the code, not the moment, decides, so every retry
    # fails alike and 25 of them only delay the archive by 3.5 days.
    RACTOR_DETERMINISTIC = Ractor.make_shareable([Ractor::IsolationError, Ractor::UnsafeError])

    # The unknown-task backoff: for the n-th unknown attempt the delay is
    # drawn from [c/2, c] with c = min(UNKNOWN_CAP, UNKNOWN_BASE * 2^(n-1)).
    # Short, because the job waits for a deploy to finish, not for a
    # failing dependency to recover: once a worker runs the code, the job
    # runs within a minute.
    UNKNOWN_BASE = 1.0
    UNKNOWN_CAP = 60.0

    module_function

    def decide(task_class, job, error, failures, first_failure_ms, now_ms: Clock.now_ms)
      choice = ask_retry_delay(task_class, job, error, failures)
      return Decision.new(:drop, nil, "retry_delay returned :drop") if :drop == choice
      return Decision.new(:archive, nil, "retry_delay returned :archive") if :archive == choice

      if choice.nil? && RACTOR_DETERMINISTIC.any? { |klass| klass === error }
        return Decision.new(:archive, nil, "#{Reflection.class_name(error)} fails the same way on every attempt " \
                                           "inside a Ractor; " \
                                           "given up at once (a retry_delay returning seconds would retry it)")
      end

      if failures >= job.max_failures
        return Decision.new(:archive, nil, "failed #{failures} time(s), reaching max_failures #{job.max_failures}")
      end

      within = task_class.solid_jobs_options[:retry_within]
      if within && now_ms - first_failure_ms >= within * 1000
        failing_s = ((now_ms - first_failure_ms) / 1000.0).round(1)
        return Decision.new(:archive, nil, "still failing #{failing_s}s after the first failure (retry_within #{within})")
      end

      Decision.new(:retry, choice || Native.default_backoff(failures), nil)
    end

    # For the `attempts`-th attempt of a job whose task is unknown here, the
    # first of them at `first_unknown_ms`: retry after a delay, or archive
    # once `retry_for` seconds have passed. The time waited is the larger of
    # the clock's and the least the backoff's own delays add up to, so a
    # backend that cannot date the first attempt (SolidEngine counts
    # deliveries) still stops after about `retry_for`.
    def decide_unknown(attempts, first_unknown_ms, retry_for: SolidJobs.config.unknown_task_retry_for,
                       now_ms: Clock.now_ms, unit: rand)
      waited = [(now_ms - first_unknown_ms) / 1000.0, unknown_backoff_floor(attempts, retry_for)].max
      if waited >= retry_for
        return Decision.new(:archive, nil, "the task is still unknown after #{attempts} attempt(s) over #{waited.round(1)}s " \
                                           "(unknown_task_retry_for #{retry_for})")
      end

      ceiling = unknown_ceiling(attempts)
      delay = (ceiling / 2) + (unit.clamp(0.0, 1.0) * ceiling / 2)
      Decision.new(:retry, [delay, retry_for - waited].min, nil)
    end

    def unknown_ceiling(attempts)
      [UNKNOWN_BASE * (2**[attempts - 1, 16].min), UNKNOWN_CAP].min
    end

    # The least time `attempts` unknown attempts took: the shortest delays
    # of the ones before it, the last of which may have been cut to end at
    # `retry_for`.
    def unknown_backoff_floor(attempts, retry_for)
      [(1...attempts).sum { |n| unknown_ceiling(n) / 2 }, retry_for].min
    end

    # The block's value is the app's: compared from our side (`:drop ==`,
    # `Numeric ===`), so its own == or is_a? is not what decides; the task
    # is named through Module#name (its to_s is the class's to answer).
    def ask_retry_delay(task_class, job, error, failures)
      block = task_class.solid_jobs_hook(:retry_delay) or return nil
      choice = block.call(failures, error, job.envelope)
      return choice if NilClass === choice || :drop == choice || :archive == choice
      return choice.to_f if Numeric === choice && choice.finite? && choice >= 0

      Log.warn("#{Reflection.name(task_class)}.retry_delay returned #{choice.inspect}; " \
               "expected seconds, :drop, :archive or nil; using the default")
      nil
    rescue Exception => e # rubocop:disable Lint/RescueException -- a broken policy must not lose the job
      Log.error("#{Reflection.name(task_class)}.retry_delay raised #{Reflection.class_name(e)}: #{e.message}; " \
                "using the default policy")
      nil
    end

    # Runs the task's after_final_failure block once the job was given up.
    def after_final_failure(task_class, job, error)
      block = task_class.solid_jobs_hook(:after_final_failure) or return
      block.call(job.envelope, error)
    rescue Exception => e # rubocop:disable Lint/RescueException -- a broken hook must not kill the worker
      Log.error("#{Reflection.name(task_class)}.after_final_failure raised #{Reflection.class_name(e)}: " \
                "#{e.message} for job #{job.id}")
    end
  end
end
