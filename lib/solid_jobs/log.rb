# frozen_string_literal: true

module SolidJobs
  # Plain line logging to $stderr, usable from any Ractor (a Logger instance
  # is not shareable). Format: `[solid-jobs] LEVEL message`. Every line is
  # redacted (SolidJobs::Native.redact, the rule the Rust log applies too),
  # so a message quoting a URL or a backend spec never prints a password.
  module Log
    # `none` silences everything (the test suite uses it).
    LEVELS = {debug: 0, info: 1, warn: 2, error: 3, none: 4}.freeze

    module_function

    def level
      LEVELS.fetch((ENV["SOLID_JOBS_LOG_LEVEL"] || "info").downcase.to_sym, 1)
    end

    def log(severity, message)
      return if LEVELS.fetch(severity) < level

      $stderr.write("[solid-jobs] #{severity.to_s.upcase} #{Native.redact(message.to_s)}\n")
    rescue IOError, SystemCallError
      nil
    end

    def debug(message) = log(:debug, message)
    def info(message) = log(:info, message)
    def warn(message) = log(:warn, message)
    def error(message) = log(:error, message)
  end
end
