# frozen_string_literal: true

module SolidJobs
  # Ruby owns the exception hierarchy; the native extension looks these up by
  # name and raises them (ext/solid_jobs/src/helpers/errors.rs). The same
  # classes serve both backends (README "Errors").
  class Error < StandardError
    # No SolidJobs exception carries a credential: a message is redacted
    # (SolidJobs::Native.redact, the rule the Rust side applies to its own
    # messages) however it was built, here or in the extension.
    def initialize(message = nil)
      super(message.is_a?(String) && defined?(Native.redact) ? Native.redact(message) : message)
    end
  end

  # A configuration value is invalid.
  class ConfigurationError < Error; end

  # The backend (Redis or SolidEngine; the message names which) could not be
  # reached, or did not answer within the connection timeouts. An enqueue
  # that raises this after a refused or broken connection wrote nothing;
  # after a timeout its outcome is unknown (the request may still run when
  # the server catches up: docs/reliability.md).
  class ConnectionError < Error; end

  # The backend answered with an error.
  class BackendError < Error; end

  # Redis answered with an error.
  class RedisError < BackendError; end

  # SolidEngine answered with an error.
  class EngineError < BackendError; end

  # `cancel` of a job that is running (claimed on Redis, reserved on
  # SolidEngine): nothing was changed, the job runs to its end.
  class JobRunning < Error; end

  # Redis refused a write because it reached `maxmemory` and evicts nothing
  # (OOM). Nothing was written; an enqueue succeeds again once workers have
  # drained enough (docs/reliability.md, "Redis out of memory").
  class OutOfMemoryError < RedisError; end

  # An envelope has the wrong shape.
  class EnvelopeError < Error; end

  # The claim was recovered and handed to someone else; nothing was changed.
  class StaleClaimError < Error; end

  # The error class that attempts and archive records name for a job whose
  # task the worker's code does not define (a rolling deploy, a worker
  # started without --require). Such a job is retried for
  # `unknown_task_retry_for` seconds, then archived under this name, so
  # `solid-jobs archive reenqueue --error SolidJobs::UnknownTaskError` puts
  # them back once the workers run the code. A task that runs other code by
  # name (the Active Job wrapper, for a job class) raises it to have the job
  # wait the same way.
  class UnknownTaskError < Error; end
end
