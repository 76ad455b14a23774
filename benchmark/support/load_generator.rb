# frozen_string_literal: true

require_relative "common"

module Bench
  # One run of the Rust load generator (`solid-engine-bench`, built by
  # `rake engine:build`) against a running engine server: producers push
  # with PUSHMANY, consumers FETCH and ACKMANY, each `batch` jobs at a time.
  # It reports its own rate, timed from the first push to the last ack.
  class LoadGenerator
    BINARY = File.expand_path("../../target/release/solid-engine-bench", __dir__)
    END_TO_END = %r{^push\+fetch\+ack end to end: (\d+) jobs/s \(([\d.]+) s\)}
    PUSH = %r{^push: (\d+) jobs/s}

    Rates = Struct.new(:push_rate, :rate, :seconds, keyword_init: true)

    def initialize(children, socket_path:, jobs:, producers:, consumers:, batch:, timeout:, log_path:)
      @children = children
      @socket_path = socket_path
      @jobs = jobs
      @shape = {producers: producers, consumers: consumers, batch: batch}
      @timeout = timeout
      @log_path = log_path
    end

    # Runs to completion (killed after `timeout`) and returns its Rates.
    def run
      raise Failure, "#{BINARY} is missing; run `bundle exec rake engine:build`" unless File.executable?(BINARY)

      pid = @children.spawn(BINARY, *arguments, in: File::NULL, out: @log_path, err: [:child, :out])
      status = Bench.wait_for_exit(pid, @timeout)
      unless status
        Bench.kill_child(pid)
        raise Failure, "solid-engine-bench did not finish within #{@timeout}s and was killed: #{Bench.tail(@log_path)}"
      end
      raise Failure, "solid-engine-bench exited with #{status.inspect}: #{Bench.tail(@log_path)}" unless status.success?

      parse(File.read(@log_path))
    end

    private

    def arguments
      ["--socket", @socket_path, "--jobs", @jobs.to_s, "--producers", @shape[:producers].to_s,
       "--consumers", @shape[:consumers].to_s, "--batch", @shape[:batch].to_s]
    end

    def parse(output)
      end_to_end = output.match(END_TO_END) or raise Failure, "no end-to-end rate in solid-engine-bench output: #{output}"
      push = output.match(PUSH)
      Rates.new(push_rate: push && Float(push[1]), rate: Float(end_to_end[1]), seconds: Float(end_to_end[2]))
    end
  end
end
