# frozen_string_literal: true

require "json"
require "socket"
require "io/wait"

module SolidJobs
  module WarmPool
    # Raised by a round trip: the warm worker ran the task and it raised
    # (RemoteError), or no warm worker answered in time (Timeout) or at all
    # (Refused). All are task failures: the failure policy retries the job.
    class Error < SolidJobs::Error; end

    class RemoteError < Error
      # The class name of the exception raised in the warm worker.
      attr_reader :remote_class

      def initialize(message, remote_class = nil)
        super(message)
        @remote_class = remote_class
      end
    end

    class Unavailable < Error; end
    class Timeout < Unavailable; end
    class Refused < Unavailable; end

    class << self
      # One round trip to the warm worker for `target_class`: sends
      # {"target_class", "arguments"} as one JSON line, returns the result
      # of its reply or raises RemoteError, Timeout or Refused.
      def call(target_class, arguments, timeout: self.timeout)
        worker = worker_for(target_class)
        path = socket_path(worker)
        started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        deadline = started + timeout
        payload = {target_class: target_class, worker: worker, socket: path}
        outcome = "remote_error"
        begin
          socket = connect(path, deadline)
          socket.write(JSON.generate("target_class" => target_class, "arguments" => arguments), "\n")
          line = read_line(socket, deadline) or
            raise Timeout, "warm worker #{worker} (#{path}) did not answer #{target_class} within #{timeout}s"
          result = parse_reply(line, worker)
          outcome = "ok"
          result
        rescue Timeout
          outcome = "timeout"
          raise
        rescue Errno::ENOENT, Errno::ECONNREFUSED, Errno::EACCES, Errno::ENOTSOCK => e
          outcome = "refused"
          raise Refused, "warm worker #{worker} refused the connection at #{path} (#{e.class}); " \
                         "is `solid-jobs warm #{worker}` running?"
        rescue Errno::EPIPE, Errno::ECONNRESET, IOError => e # IOError includes EOFError
          raise RemoteError.new("warm worker #{worker} closed the connection (#{e.class}: #{e.message})", e.class.name)
        ensure
          socket&.close
          record_roundtrip(outcome, Process.clock_gettime(Process::CLOCK_MONOTONIC) - started, payload)
        end
      end

      private

      # A busy warm worker's backlog may be full (EAGAIN): wait for room
      # until the deadline, which then counts as a timeout.
      def connect(path, deadline)
        socket = Socket.new(:UNIX, :STREAM)
        address = Socket.sockaddr_un(path)
        begin
          socket.connect_nonblock(address)
        rescue IO::WaitWritable, Errno::EAGAIN
          remaining = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
          raise Timeout, "warm worker at #{path} accepted no connection in time (backlog full)" unless remaining.positive?

          sleep([remaining, 0.01].min)
          retry
        rescue Errno::EISCONN
          nil
        end
        socket
      rescue StandardError
        socket&.close
        raise
      end

      def read_line(socket, deadline)
        buffer = +""
        until (newline = buffer.index("\n"))
          remaining = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
          return nil unless remaining.positive? && socket.wait_readable(remaining)

          chunk = socket.read_nonblock(65_536, exception: false)
          raise EOFError, "end of stream before a reply" if chunk.nil?

          buffer << chunk unless chunk == :wait_readable
        end
        buffer[0, newline]
      end

      def parse_reply(line, worker)
        reply = JSON.parse(line)
        status = reply.is_a?(Hash) && reply["status"]
        return reply["result"] if status == "ok"

        if status == "error"
          raise RemoteError.new("#{reply["error_class"]}: #{reply["message"]} (in warm worker #{worker})",
                                reply["error_class"].to_s)
        end

        raise RemoteError, "warm worker #{worker} sent a reply of unknown shape: #{line[0, 200]}"
      rescue JSON::ParserError => e
        raise RemoteError, "warm worker #{worker} sent a malformed reply (#{e.message[0, 100]})"
      end
    end
  end
end
