# frozen_string_literal: true

require "set"

module Bench
  # Enqueue→start latency, stamped by the job itself.
  #
  # The producer reads the clock right before the enqueue call and passes the
  # reading as the job's first argument. The job, first thing when it runs,
  # reads the clock again and appends "enqueued started\n" to one file. The
  # harness reads that file; it never talks to the worker, so the measurement
  # works the same for Sidekiq threads, SolidJobs worker Ractors and any
  # number of worker processes.
  #
  # Clock: CLOCK_MONOTONIC in nanoseconds. On Linux it is one system-wide
  # clock, comparable across processes on the same host, and unlike
  # CLOCK_REALTIME it is never stepped (NTP), which over a ten-minute soak
  # could produce negative or inflated latencies.
  #
  # Why a file: each line is one write(2) on a file opened O_APPEND, which
  # the kernel appends whole even when several Ractors, threads or
  # processes write at once; no lock, no shared Ruby object, nothing a
  # worker Ractor may not touch. The path reaches the worker through
  # ENV_NAME, read once at load time (see benchmark/latency_jobs.rb).
  module StartLog
    ENV_NAME = "SOLID_JOBS_BENCH_START_LOG"
    # How often a waiting harness looks for a new line. Only the harness's
    # reaction time depends on it, never a measured latency (both stamps are
    # taken by the producer and the job).
    POLL_INTERVAL = 0.0003

    def self.now_ns = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)

    # Called by a job. `path` must be a frozen String (a constant), so this
    # runs inside a worker Ractor.
    def self.record(path, enqueued_ns)
      started = now_ns
      raise ArgumentError, "#{ENV_NAME} was not set when the jobs file was loaded" unless path

      File.open(path, "a") { |f| f.write("#{enqueued_ns} #{started}\n") }
    end

    # One start: the two clock readings, and the latency in milliseconds.
    Start = Struct.new(:enqueued_ns, :started_ns) do
      def latency_ms = (started_ns - enqueued_ns) / 1_000_000.0
    end

    # Reads the starts appended since the previous call. A line still being
    # written (no newline yet) is kept for the next call.
    class Reader
      def initialize(path)
        @path = path
        @partial = +""
      end

      def read_new
        return [] unless file

        lines = (@partial + file.read).split("\n", -1)
        # The text after the last newline ("" when the chunk ended a line).
        @partial = lines.pop || +""
        lines.map { |line| parse(line) }
      end

      # Blocks until `n` new starts were read; they are returned. Raises
      # Failure after `timeout` seconds, or at once when `worker` exited.
      def wait_for(n, timeout:, worker: nil)
        starts = []
        deadline = Bench.now + timeout
        loop do
          starts.concat(read_new)
          return starts if starts.size >= n

          raise Failure, "the worker exited (#{worker.exit_status.inspect}) before #{n} job(s) started" if worker&.exited?
          raise Failure, "only #{starts.size} of #{n} job(s) started within #{timeout}s" if Bench.now > deadline

          sleep POLL_INTERVAL
        end
      end

      def close
        @file&.close
        @file = nil
      end

      private

      # Opened on first use: the worker creates the file with its first line.
      def file
        @file ||= File.exist?(@path) ? File.open(@path, "r") : nil
      end

      def parse(line)
        enqueued, started = line.split(" ", 2)
        Start.new(Integer(enqueued), Integer(started))
      rescue ArgumentError, TypeError
        raise Failure, "malformed line in the start log #{@path}: #{line.inspect}"
      end
    end

    # Which jobs started, by their enqueue stamp (unique: one producer,
    # a monotonic clock), so a job that never starts, or starts twice, is
    # caught at the end of a long run.
    class Tally
      attr_reader :duplicates

      def initialize(reader)
        @reader = reader
        @seen = Set.new
        @duplicates = 0
      end

      def started = @seen.size

      # The starts read since the last call (see Reader#read_new).
      def read_new = add(@reader.read_new)

      def add(starts)
        starts.each { |s| @duplicates += 1 unless @seen.add?(s.enqueued_ns) }
        starts
      end
    end
  end
end
