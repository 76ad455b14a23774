# frozen_string_literal: true

require "rbconfig"

# The one set of process helpers of the test suite and the benchmarks
# (test/support/processes/): redis-server, solid-engine-server, solid-jobs
# workers, the dashboard, and the group they can all be started in. They
# live with the tests because the suite is their first user and the
# stricter one; benchmark/ builds on them, never the other way round.

# A child process could not be started, or did not become ready.
class ProcessError < StandardError; end

# One child process, its stdout and stderr appended to `log`. Every helper
# below is one of these, so starting, signalling, reaping and stopping work
# the same everywhere.
class ChildProcess
  ROOT = File.expand_path("../../..", __dir__)
  # TERM is the graceful stop every process here implements; past this a
  # process that has not exited is killed.
  STOP_TIMEOUT = 30

  attr_reader :pid, :log, :exit_status, :command

  # `children`: a ChildGroup to start the process in (benchmarks), or nil.
  # `spawn_options`: more Process.spawn options (unsetenv_others: true for
  # a process whose whole environment is `env`).
  def initialize(command, log:, env: {}, children: nil, chdir: ROOT, spawn_options: {})
    @command = command
    @log = log
    @env = env
    @children = children
    @chdir = chdir
    @spawn_options = spawn_options
  end

  def start
    @exit_status = nil
    @reaped = false
    options = {chdir: @chdir, in: File::NULL, out: [@log, "a"], err: %i[child out], **@spawn_options}
    @pid = @children ? @children.spawn(@env, *@command, **options) : Process.spawn(@env, *@command, **options)
    self
  end

  # The result of Process.kill, or nil when the process is already gone.
  def signal(name)
    Process.kill(name, @pid)
  rescue Errno::ESRCH
    nil
  end

  # Non-blocking: true once the process has exited (it is then reaped and
  # its status kept in exit_status; pid still names it), or when it was
  # never started.
  def exited?
    return true if @reaped || !@pid

    _, @exit_status = Process.wait2(@pid, Process::WNOHANG)
    @reaped = !@exit_status.nil?
  rescue Errno::ECHILD # reaped by someone else: the status is lost
    @reaped = true
  end

  def running? = !exited?

  # Waits for the exit and returns its status; kills the process and
  # raises after `timeout` seconds.
  def wait(timeout: STOP_TIMEOUT)
    return @exit_status if reaped_within(timeout)

    kill!
    raise ProcessError, "#{name} #{@pid} did not exit within #{timeout}s:\n#{log_tail}"
  end

  # `signal` (TERM: graceful), then the exit status; nil when the process
  # had to be killed after `timeout` seconds. Safe to call again.
  def stop(signal = "TERM", timeout: STOP_TIMEOUT)
    return @exit_status if exited?

    signal(signal)
    # A paused process would never act on the signal.
    resume
    return @exit_status if reaped_within(timeout)

    kill!
    nil
  end

  def kill!
    return if exited?

    signal("KILL")
    _, @exit_status = Process.wait2(@pid)
  rescue Errno::ECHILD
    nil
  ensure
    @reaped = true
  end

  # SIGSTOP: the process keeps its sockets, the kernel still accepts new
  # connections into a server's listen backlog, and nothing is ever
  # answered (a hung server). `resume` (SIGCONT) lets it read what was sent
  # meanwhile.
  def pause
    signal("STOP")
    @paused = true
    wait_until_stopped
  end

  def resume
    return unless @paused

    signal("CONT")
    @paused = false
  end

  def log_tail(lines = 30)
    File.exist?(@log) ? File.readlines(@log).last(lines).join : "(no output)"
  end

  def description = @command.join(" ")

  private

  def name = File.basename(@command.first)

  def reaped_within(timeout)
    deadline = monotonic + timeout
    until exited?
      return false if monotonic > deadline

      sleep 0.02 # poll interval of the bounded wait above
    end
    true
  end

  # Until the block is true; raises when the process exits first or
  # `timeout` passes, with the end of its log.
  def wait_until_ready(timeout)
    deadline = monotonic + timeout
    until yield
      raise ProcessError, "#{name} exited at startup (#{@exit_status.inspect}):\n#{log_tail}" if exited?

      if monotonic > deadline
        kill!
        raise ProcessError, "#{name} did not become ready within #{timeout}s:\n#{log_tail}"
      end
      sleep 0.02 # poll interval of the bounded wait above
    end
  end

  # kill(2) returns before the process stops: one of its threads must run
  # to start the group stop, and until then the others keep serving (on a
  # loaded host, for milliseconds). Paused means every thread is stopped.
  def wait_until_stopped
    deadline = monotonic + 10
    until Dir.glob("/proc/#{@pid}/task/*/stat").all? { |f| File.read(f)[/\) (\S)/, 1] == "T" }
      raise ProcessError, "process #{@pid} did not stop" if monotonic > deadline

      sleep 0.005 # poll interval of the bounded wait above
    end
  rescue Errno::ENOENT
    retry # a thread ended while we looked
  end

  def monotonic = Process.clock_gettime(Process::CLOCK_MONOTONIC)
end

# Puts every process a benchmark starts into one process group, led by a
# tiny shell loop that kills the group if the benchmark dies without
# cleaning up: a crash inside a native extension (or kill -9) skips every
# `ensure`, and would otherwise leave servers and a busy worker running.
#
# The watchdog leads the group, not the first child: setpgid into a group
# whose leader has exited and been reaped fails with EPERM, and children
# such as an engine server per case come and go during a run.
class ChildGroup
  WATCH_INTERVAL = 1

  def spawn(*command, **options)
    start_watchdog unless @watchdog
    Process.spawn(*command, **options, pgroup: @watchdog)
  end

  # Normal cleanup has stopped the children; the watchdog is not needed.
  def close
    return unless @watchdog

    Process.kill("KILL", @watchdog)
    Process.wait(@watchdog)
  rescue Errno::ESRCH, Errno::ECHILD
    nil
  ensure
    @watchdog = nil
  end

  private

  # `kill -KILL 0` signals the watchdog's own group: every child, and the
  # watchdog last of all.
  def start_watchdog
    script = "while kill -0 #{Process.pid} 2>/dev/null; do sleep #{WATCH_INTERVAL}; done; kill -KILL 0"
    @watchdog = Process.spawn("sh", "-c", script, pgroup: true, in: File::NULL, out: File::NULL, err: File::NULL)
  end
end
