# frozen_string_literal: true

module SolidJobs
  # Decides what happens to a job whose task raised (docs/reliability.md).
  #
  # 1. The task's `retry_delay` block, if any, is asked first: `:drop` or
  #    `:archive` give the job up now; seconds choose the next delay; nil
  #    means the default. A block that raises or returns anything else is
  #    logged and treated as nil.
  # 2. A job that has failed `max_failures` times, or whose first failure was
  #    `retry_within` seconds ago or more, is archived.
  # 3. Otherwise it is retried after the chosen delay, by default the native
  #    capped exponential backoff with equal jitter.
  module FailurePolicy
    Decision = Struct.new(:action, :delay, :reason) do
      def final? = action != :retry
    end

    module_function

    def decide(task_class, job, error, failures, first_failure_ms, now_ms: Clock.now_ms)
      choice = ask_retry_delay(task_class, job, error, failures)
      return Decision.new(:drop, nil, "retry_delay returned :drop") if :drop == choice
      return Decision.new(:archive, nil, "retry_delay returned :archive") if :archive == choice

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
