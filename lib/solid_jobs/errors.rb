# frozen_string_literal: true

module SolidJobs
  # Ruby owns the exception hierarchy; the native extension looks these up by
  # name and raises them (ext/solid_jobs/src/helpers/errors.rb).
  class Error < StandardError; end

  # A configuration value is invalid.
  class ConfigurationError < Error; end

  # Redis could not be reached. An enqueue that raises this wrote nothing.
  class ConnectionError < Error; end

  # Redis answered with an error.
  class RedisError < Error; end

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
