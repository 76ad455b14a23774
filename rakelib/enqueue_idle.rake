# frozen_string_literal: true

namespace :benchmark do
  desc "Enqueue: single and bulk enqueue rates at 1/2/4/8 producer threads, SolidJobs vs Sidekiq push/push_bulk"
  task enqueue: :compile do
    ruby "benchmark/enqueue.rb"
  end

  desc "Idle: worker CPU and Redis commands/s of an idle worker (concurrency 8), SolidJobs vs Sidekiq"
  task idle: :compile do
    ruby "benchmark/idle.rb"
  end
end
