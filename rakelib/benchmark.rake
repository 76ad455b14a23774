# frozen_string_literal: true

# Every harness under benchmark/ as `rake benchmark:<name>`; docs/benchmarks.md
# describes each. Settings are BENCH_* environment variables (see the head of
# each benchmark/<name>.rb); BENCH_SMOKE=1 runs one at tiny sizes.
namespace :benchmark do
  # name => [needs the engine binaries, description]
  {
    comparison: [true, "Drain throughput, CPU, memory, allocations and Redis commands per job: Sidekiq (threads, processes) " \
                       "vs SolidJobs (Redis, SolidEngine) per scenario and concurrency (BENCH_CLIENTS, BENCH_SCENARIOS, " \
                       "BENCH_CONCURRENCY, BENCH_REPETITIONS, BENCH_JOBS)"],
    stress: [true, "Drain BENCH_JOBS (10000) per workload and concurrency; verify every job ran exactly once"],
    soak: [true, "Steady load on a solid-jobs worker for BENCH_SECONDS (600); fails on lost jobs or memory growth"],
    enqueue: [false, "Single and bulk enqueue rates at 1/2/4/8 producer threads, SolidJobs vs Sidekiq push/push_bulk"],
    latency: [true, "Enqueue→start p50/p95/p99 with idle workers and after 2.5 s idle; " \
                    "SolidJobs on Redis and SolidEngine vs Sidekiq"],
    idle: [false, "Worker CPU and Redis commands/s of an idle worker (concurrency 8), SolidJobs vs Sidekiq"],
    nodes: [false, "Redis commands/s and CPU of 1/10/50/200 worker nodes (Rust core, one channel each of 20), idle " \
                   "and at 1,000 jobs/s; claims, empty claims and doorbells per node (BENCH_NODES, BENCH_SECONDS, BENCH_RATE)"],
    commands: [false, "Redis commands and round trips per SolidJobs operation (enqueue, worker turn, retry...), " \
                      "next to Sidekiq's"],
    flow: [false, "Drain of a concurrency-limited no-op task (1,000 keys x limit 5; one key x limit 8), a rate-limited " \
                  "one (1,000 keys under their rate) and unlimited jobs beside a throttled backlog vs the same task " \
                  "unlimited, side by side: jobs/s, CPU, Redis commands and script time per job, ratios (BENCH_SCENARIOS, " \
                  "BENCH_CONCURRENCY, BENCH_REPETITIONS, BENCH_JOBS)"],
    engine: [true, "SolidEngine's load generator per durability mode"],
    hybrid: [false, "Ractor path vs warm pool IPC round trip (transport, sustained, burst)"],
    scripts: [false, "Redis time per call of claim.lua and ack.lua apart vs ack_claim.lua, at batches of 1, 12 and 100"]
  }.each do |name, (engine, description)|
    desc description
    task name => [:compile, *("engine:build" if engine)] do
      ruby "benchmark/#{name}.rb"
    end
  end
end
