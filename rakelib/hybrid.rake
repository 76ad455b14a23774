# frozen_string_literal: true

desc "Hybrid: Ractor path vs warm pool IPC round trip (transport, sustained, burst); " \
     "p50/p95/p99 to benchmark/results/hybrid.{json,md}"
task hybrid: :compile do
  ruby "benchmark/hybrid.rb"
end
