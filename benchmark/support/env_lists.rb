# frozen_string_literal: true

require_relative "common"

module Bench
  # Comma-separated lists from the environment, checked like
  # Bench.positive_integer: a bad value fails the run before anything
  # starts, naming the variable and what it accepts.
  module EnvLists
    module_function

    # "1,2,8" -> [1, 2, 8]
    def positive_integers(env, name, default)
      return default unless env[name]

      values = items(env, name).map { |item| Integer(item, exception: false) }
      raise Failure, "#{name} must be a comma-separated list of positive integers (got #{env[name].inspect})" unless values.all? { |v| v&.positive? }

      values.uniq
    end

    # Names from `allowed`, in the order given.
    def choices(env, name, allowed, default)
      return default unless env[name]

      values = items(env, name)
      unknown = values - allowed
      raise Failure, "#{name}: unknown #{unknown.join(", ")} (choose from #{allowed.join(", ")})" unless unknown.empty?

      values.uniq
    end

    def items(env, name)
      values = env[name].split(",").map(&:strip).reject(&:empty?)
      raise Failure, "#{name} is empty" if values.empty?

      values
    end
  end
end
