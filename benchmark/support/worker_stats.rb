# frozen_string_literal: true

module Bench
  # Allocations inside a worker process, for benchmark/comparison.rb. When
  # BENCH_STATS_DIR is set, the jobs file (loaded after the job library and
  # before any worker starts) records GC.stat(:total_allocated_objects),
  # and the process writes "<baseline> <final>" to <dir>/alloc-<pid> when
  # it exits. The count is process-wide, Ractors included.
  #
  # The window is therefore: worker start (threads or Ractors, connections),
  # every job, heartbeats, and the graceful stop. Library and CLI loading
  # before the jobs file are not in it. The fixed part is spread over the
  # case's jobs, so small cases overstate allocations per job.
  #
  # A process that exits without running at_exit (KILL, Kernel.exit!)
  # writes nothing; the benchmark reports that as an unclean stop.
  module WorkerStats
    PREFIX = "alloc-"

    module_function

    def install(dir)
      baseline = GC.stat(:total_allocated_objects)
      at_exit do
        File.write(File.join(dir, "#{PREFIX}#{Process.pid}"), "#{baseline} #{GC.stat(:total_allocated_objects)}\n")
      end
    end

    # Allocations of every worker process that wrote its file, keyed by
    # pid.
    def read(dir)
      Dir[File.join(dir, "#{PREFIX}*")].to_h do |path|
        baseline, final = File.read(path).split.map { |v| Integer(v) }
        [Integer(File.basename(path).delete_prefix(PREFIX)), final - baseline]
      end
    end
  end
end
