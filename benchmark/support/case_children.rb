# frozen_string_literal: true

module Bench
  # A view of the run's ChildGroup for one benchmark case. It passes every
  # spawn through (so the watchdog still covers it), adds the case's
  # environment to each child, and remembers pids: the existing server and
  # worker helpers take a children object and keep their pids private, and
  # the case needs those pids to read CPU and memory from /proc.
  class CaseChildren
    def initialize(children, env)
      @children = children
      @env = env
      @pids = []
    end

    def spawn(*command, **options)
      env = command.first.is_a?(Hash) ? @env.merge(command.shift) : @env
      @children.spawn(env, *command, **options).tap { |pid| @pids << pid }
    end

    # The pids of the processes the block started.
    def collect
      first = @pids.size
      yield
      @pids[first..]
    end
  end
end
