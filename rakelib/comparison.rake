# frozen_string_literal: true

# SolidJobs against Sidekiq side by side (benchmark/comparison.rb), and the
# exactly-once stress drain (benchmark/stress.rb). Both start solid-jobs
# workers (the extension) and SolidEngine servers (the engine binary).

desc "Comparison: Sidekiq (threads, processes) vs SolidJobs (Redis, SolidEngine) per scenario and concurrency; " \
     "results, CSV and plots in benchmark/results (BENCHMARK_CLIENTS, _SCENARIOS, _CONCURRENCY, _REPETITIONS; BENCH_SMOKE=1)"
task comparison: [:compile, "engine:build"] do
  ruby "benchmark/comparison.rb"
end

desc "Stress: drain STRESS_JOBS (10000) per workload and concurrency; verify every job ran exactly once " \
     "(STRESS_CLIENTS, _SCENARIOS, _CONCURRENCY, _REPETITIONS; BENCH_SMOKE=1)"
task stress: [:compile, "engine:build"] do
  ruby "benchmark/stress.rb"
end
