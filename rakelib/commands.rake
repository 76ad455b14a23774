# frozen_string_literal: true

namespace :benchmark do
  desc "Redis commands and round trips per SolidJobs operation (enqueue, worker turn, retry...), next to Sidekiq's"
  task commands: :compile do
    ruby "benchmark/commands.rb"
  end
end
