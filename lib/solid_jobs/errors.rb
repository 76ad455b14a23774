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

  # Redis refused a write because it reached `maxmemory` and evicts nothing
  # (OOM). Nothing was written; an enqueue succeeds again once workers have
  # drained enough (docs/reliability.md, "Redis out of memory").
  class OutOfMemoryError < RedisError; end

  # An envelope has the wrong shape.
  class EnvelopeError < Error; end

  # The claim was recovered and handed to someone else; nothing was changed.
  class StaleClaimError < Error; end
end
