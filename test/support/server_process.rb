# frozen_string_literal: true

# Stopping a server child process (redis-server, solid-engine-server) the
# same way everywhere in the suite: a signal, then reaping it.
module ServerProcess
  def stop(signal = "TERM")
    return unless @pid

    Process.kill(signal, @pid)
    # A paused server would never act on the signal.
    Process.kill("CONT", @pid) if @paused
    Process.wait(@pid)
  rescue Errno::ESRCH, Errno::ECHILD
    nil
  ensure
    @pid = nil
    @paused = false
  end

  def kill = stop("KILL")
  def running? = !@pid.nil?

  # SIGSTOP: the server keeps its sockets, the kernel still accepts new
  # connections into the listen backlog, and nothing is ever answered (a
  # hung server). `resume` (SIGCONT) lets it read what was sent meanwhile.
  def pause
    Process.kill("STOP", @pid)
    @paused = true
    wait_until_stopped
  end

  def resume
    return unless @pid && @paused

    Process.kill("CONT", @pid)
    @paused = false
  end

  private

  # kill(2) returns before the process stops: one of its threads must run
  # to start the group stop, and until then the others keep serving (on a
  # loaded host, for milliseconds). Paused means every thread is stopped.
  def wait_until_stopped
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
    until Dir.glob("/proc/#{@pid}/task/*/stat").all? { |f| File.read(f)[/\) (\S)/, 1] == "T" }
      raise "process #{@pid} did not stop" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

      sleep 0.005
    end
  rescue Errno::ENOENT
    retry # a thread ended while we looked
  end
end
