# frozen_string_literal: true

module Bench
  # Per-command call counts from INFO commandstats.
  #
  # Redis counts commands run inside Lua scripts (redis.call) as well as the
  # EVALSHA that ran them, so a script-heavy client shows more "commands"
  # than round trips; the per-command breakdown makes that visible.
  module CommandStats
    module_function

    def snapshot(redis)
      redis.info("commandstats").transform_values { |stats| Integer(stats.fetch("calls")) }
    end

    # Calls between two snapshots, less those the benchmark made itself.
    def delta(before, after, own)
      after.to_h { |name, calls| [name, calls - before.fetch(name, 0) - own.fetch(name, 0)] }
           .select { |_, calls| calls.positive? }
    end
  end
end
