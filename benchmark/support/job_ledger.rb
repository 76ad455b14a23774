# frozen_string_literal: true

module Bench
  # Proof that every job ran exactly once, for benchmark/stress.rb. Off
  # unless BENCH_LEDGER_DIR is set in the worker's environment, so the
  # comparison's timings never include it.
  #
  # Worker side: each worker thread (or Ractor: each has its own thread)
  # appends the job number to its own file, unbuffered, so nothing is lost
  # to a buffer when the process exits and no two writers share a file.
  # Benchmark side: `tally` counts every number over all files.
  module JobLedger
    # A frozen String (or nil), hence shareable: worker Ractors read it.
    DIR = ENV["BENCH_LEDGER_DIR"]&.dup&.freeze

    Tally = Struct.new(:exactly_once, :missing, :duplicates, :unexpected, keyword_init: true)

    module_function

    def record(n)
      return unless DIR && n

      file = Thread.current[:bench_job_ledger] ||= open_file
      file.write("#{n}\n")
    end

    def open_file
      File.open(File.join(DIR, "#{Process.pid}-#{Thread.current.object_id}.ids"), "a").tap { |f| f.sync = true }
    end

    # Jobs 0...jobs each expected exactly once.
    def tally(dir, jobs)
      seen = Hash.new(0)
      Dir[File.join(dir, "*.ids")].each { |path| File.foreach(path) { |line| seen[Integer(line)] += 1 } }
      expected = 0...jobs
      Tally.new(
        exactly_once: seen.count { |n, times| expected.cover?(n) && times == 1 },
        missing: jobs - seen.count { |n, _| expected.cover?(n) },
        duplicates: seen.sum { |n, times| expected.cover?(n) ? times - 1 : 0 },
        unexpected: seen.sum { |n, times| expected.cover?(n) ? 0 : times }
      )
    end
  end
end
