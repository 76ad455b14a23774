# frozen_string_literal: true

module SolidJobs
  # Ruby owns the exception hierarchy; the native extension looks these up by
  # name and raises them (ext/solid_jobs/src/helpers/errors.rb).
  class Error < StandardError; end

  # A configuration value is invalid.
  class ConfigurationError < Error; end

  # Redis could not be reached, or did not answer within the connection
  # timeouts. An enqueue that raises this after a refused or broken
  # connection wrote nothing; after a timeout its outcome is unknown (the
  # request may still run when Redis catches up: docs/reliability.md).
  class ConnectionError < Error; end

  # Redis answered with an error.
  class RedisError < Error; end

  # An envelope has the wrong shape.
  class EnvelopeError < Error; end

  # The claim was recovered and handed to someone else; nothing was changed.
  class StaleClaimError < Error; end
end
