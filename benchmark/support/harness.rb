# frozen_string_literal: true

require_relative "common"

module Bench
  # What every harness's entry point does, for a class that `extend`s it and
  # has `settings(env)`, `new(settings)` and `#run` (an exit status):
  #
  #   exit Bench::Latency.main(ENV) if $PROGRAM_NAME == __FILE__
  #
  # A Failure (a case that could not be measured, a bad setting) is one line
  # on stderr and exit status 1, not a backtrace.
  module Harness
    def main(env)
      new(settings(env)).run
    rescue Failure => e
      warn "#{failure_label} failed: #{e.message}"
      1
    rescue Interrupt
      # Children and temporary directories are gone by now (ensure in run).
      warn "interrupted"
      130
    end

    # The word before "failed:" on stderr.
    def failure_label = "benchmark"

    def smoke?(env, name = "BENCH_SMOKE") = env[name] == "1"

    # Where results go: `name` from the environment, else `default`, except
    # that a smoke run writes nothing unless told where (it must not
    # overwrite the real results).
    def output_setting(env, name, default, smoke:)
      env[name] || (smoke ? nil : default)
    end

    # "1,2,4,8" -> [1, 2, 4, 8] (duplicates dropped, sorted when `sort`); a
    # bad value fails the run before anything starts.
    def integer_list(env, name, default, sort: false)
      return default unless env[name]

      values = env[name].split(",").map { |v| Integer(v.strip, exception: false) }
      unless !values.empty? && values.all? { |v| v&.positive? }
        raise Failure, "#{name} must be a comma-separated list of positive integers, e.g. 1,2,4,8 (got #{env[name].inspect})"
      end

      sort ? values.uniq.sort : values.uniq
    end
  end
end
