# frozen_string_literal: true

require "rbconfig"

module Bench
  # One worker node (Sidekiq's or SolidJobs' own CLI, the latter on Redis or
  # SolidEngine) in its own process, with stdout and stderr captured to a
  # file shown when something fails.
  class WorkerProcess
    STOP_TIMEOUT = 30
    ROOT = File.expand_path("../..", __dir__)
    JOBS_FILE = "./benchmark/jobs.rb"
    ENGINE_JOBS_FILE = "./benchmark/engine_jobs.rb"

    # `jobs_file` (relative to the repository root) is the file the CLI
    # loads; a harness with its own jobs passes its own.
    def self.sidekiq(children, redis_url, concurrency, log_path, jobs_file: JOBS_FILE)
      new(children, ["sidekiq", "-r", jobs_file, "-c", concurrency.to_s, "-q", "bench"],
          {"REDIS_URL" => redis_url}, log_path)
    end

    def self.solid_jobs(children, redis_url, concurrency, log_path, jobs_file: JOBS_FILE)
      new(children, [RbConfig.ruby, "-Ilib", "exe/solid-jobs", "--require", jobs_file, "--concurrency", concurrency.to_s,
                     "--channel", "bench", "--redis-url", redis_url], {}, log_path)
    end

    # The CLI has only --redis-url, so the engine's URL reaches the jobs file
    # (which configures the backend) through the environment.
    def self.solid_jobs_engine(children, engine_url, concurrency, log_path, jobs_file: ENGINE_JOBS_FILE)
      new(children, [RbConfig.ruby, "-Ilib", "exe/solid-jobs", "--require", jobs_file, "--concurrency", concurrency.to_s,
                     "--channel", "bench"], {"SOLID_JOBS_BENCH_ENGINE_URL" => engine_url}, log_path)
    end

    attr_reader :exit_status

    # The CLI process itself (no shell in between), for /proc readings;
    # nil once it has exited.
    def pid = @pid

    def initialize(children, command, env, log_path)
      @children = children
      @command = command
      @env = env
      @log_path = log_path
    end

    def start
      @pid = @children.spawn(@env, *@command, chdir: ROOT, in: File::NULL, out: @log_path, err: [:child, :out])
      self
    end

    # Non-blocking: true once the process has exited (and reaps it).
    def exited?
      return true unless @pid

      _, @exit_status = Process.wait2(@pid, Process::WNOHANG)
      @pid = nil if @exit_status
      !@exit_status.nil?
    end

    # TERM (the graceful stop both CLIs implement), then KILL if it lingers.
    # Returns false when KILL was needed.
    def stop
      return true if exited?

      signal("TERM")
      deadline = Bench.now + STOP_TIMEOUT
      sleep 0.05 until exited? || Bench.now > deadline
      return true unless @pid

      signal("KILL")
      Process.wait(@pid)
      @pid = nil
      false
    rescue Errno::ECHILD
      @pid = nil
      true
    end

    def log_tail(lines = 30)
      File.exist?(@log_path) ? File.readlines(@log_path).last(lines).join : "(no output)"
    end

    def description = @command.join(" ")

    private

    def signal(name)
      Process.kill(name, @pid)
    rescue Errno::ESRCH
      nil
    end
  end
end
