# frozen_string_literal: true

module Bench
  # The Sidekiq workers whose Redis traffic benchmark/commands.rb counts,
  # the counterparts of CommandCountTasks.
  module CommandCountSidekiq
    QUEUE = "bench"

    class Noop
      include Sidekiq::Worker
      sidekiq_options queue: QUEUE

      def perform(*) = nil
    end

    # Sidekiq's default: retried (25 times) with its own backoff.
    class Failing
      include Sidekiq::Worker
      sidekiq_options queue: QUEUE

      def perform(*) = raise(ArgumentError, "failing on purpose for benchmark/commands.rb")
    end
  end
end
