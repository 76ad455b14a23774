# frozen_string_literal: true

namespace :benchmark do
  desc "Latency: enqueue→start p50/p95/p99 with idle workers and after 2.5 s idle; SolidJobs on Redis and SolidEngine vs Sidekiq"
  task latency: [:compile, "engine:build"] do
    ruby "benchmark/latency.rb"
  end
end
