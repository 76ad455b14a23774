# frozen_string_literal: true

require "json"
require "socket"
require "io/wait"

module SolidJobs
  # A persistent warm process for the warm pool (`solid-jobs warm ID`).
  # Loads the app once (`config/environment.rb` of its working directory,
  # or the file given as `environment:`),
  # listens on WarmPool.socket_path(ID) (mode 0600, removed on INT/TERM),
  # and serves one request at a time: a JSON line
  # {"target_class": "...", "arguments": [...]} is answered with
  # {"status":"ok","result":...} or
  # {"status":"error","error_class":"...","message":"..."}. A malformed
  # request gets an error reply; the worker goes on.
  class WarmWorker
    attr_reader :path

    def initialize(id, root: Dir.pwd, environment: nil, request_timeout: WarmPool.timeout)
      @id = id
      @root = root
      @environment = environment
      @path = WarmPool.socket_path(id)
      @request_timeout = request_timeout
    end

    def run
      load_app
      listen
      @stop_reader, stop_writer = IO.pipe
      %w[INT TERM].each do |signal|
        Signal.trap(signal) do
          # No new connections from now on; the current request finishes.
          File.unlink(@path) if File.socket?(@path)
          stop_writer.write_nonblock(".", exception: false)
        end
      end
      Log.info("warm worker #{@id} ready on #{@path}, pid #{Process.pid}")
      serve_until_stopped
      Log.info("warm worker #{@id} stopped")
      0
    ensure
      @server&.close
      File.unlink(@path) if @server && File.socket?(@path) && File.stat(@path).ino == @inode
    end

    # One request line in, one reply Hash out; never raises.
    def handle(line)
      request = JSON.parse(line)
      unless request.is_a?(Hash) && request["target_class"].is_a?(String) && request["arguments"].is_a?(Array)
        return error("ArgumentError", "a request is one JSON object: {\"target_class\": String, \"arguments\": Array}")
      end

      {"status" => "ok", "result" => run_task(request["target_class"], request["arguments"])}
    rescue JSON::ParserError => e
      error("JSON::ParserError", "malformed request: #{e.message[0, 200]}")
    rescue Exception => e # rubocop:disable Lint/RescueException -- any task failure is a reply, never the end of the worker
      raise if SystemExit === e || SignalException === e

      error(Reflection.class_name(e), e.message)
    end

    private

    def load_app
      environment = @environment || File.join(@root, "config", "environment.rb")
      raise ArgumentError, "no #{environment}: run the warm worker from the app's root" unless File.file?(environment)

      require environment
    end

    def listen
      if File.socket?(@path)
        begin
          UNIXSocket.new(@path).close
          raise ArgumentError, "warm worker #{@id} is already running on #{@path}"
        rescue Errno::ECONNREFUSED
          File.unlink(@path) # left by a worker that was killed
        end
      end
      previous = File.umask(0o177) # created 0600: only this user may send code to run
      begin
        @server = UNIXServer.new(@path)
      ensure
        File.umask(previous)
      end
      File.chmod(0o600, @path)
      @inode = File.stat(@path).ino
    end

    def serve_until_stopped
      loop do
        ready, = IO.select([@server, @stop_reader])
        break if ready.include?(@stop_reader)

        connection = @server.accept_nonblock(exception: false)
        serve(connection) unless connection == :wait_readable
      end
    end

    def serve(connection)
      line = read_line(connection)
      reply = line ? handle(line) : error("Timeout", "no request line within #{@request_timeout}s")
      connection.write(encode(reply), "\n")
    rescue Errno::EPIPE, Errno::ECONNRESET, IOError => e
      Log.warn("warm worker #{@id}: client went away before the reply (#{e.class}); it may have timed out")
    ensure
      connection.close
    end

    def read_line(connection)
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + @request_timeout
      buffer = +""
      until (newline = buffer.index("\n"))
        remaining = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
        return nil unless remaining.positive? && connection.wait_readable(remaining)

        chunk = connection.read_nonblock(65_536, exception: false)
        return (buffer.empty? ? nil : buffer) if chunk.nil? # a last line without newline still counts

        buffer << chunk unless chunk == :wait_readable
      end
      buffer[0, newline]
    end

    def run_task(name, arguments)
      klass = Object.const_get(name)
      raise TypeError, "#{name} is not a class" unless Class === klass

      # Asked of the class's method table, not of the instance, which may
      # answer respond_to? its own way.
      method = Reflection.method_defined?(klass, :execute_task) ? :execute_task : :perform
      run = -> { klass.new.public_send(method, *arguments) }
      # Under Rails, each request is a unit of work: connections go back to
      # their pools and code reloads happen between requests.
      if defined?(::Rails) && ::Rails.respond_to?(:application) && ::Rails.application.respond_to?(:executor)
        ::Rails.application.executor.wrap(&run)
      else
        run.call
      end
    end

    def encode(reply)
      JSON.generate(reply)
    rescue JSON::GeneratorError, Encoding::UndefinedConversionError => e
      JSON.generate(error("JSON::GeneratorError", "the task's result is not JSON: #{e.message[0, 200]}"))
    end

    def error(error_class, message)
      {"status" => "error", "error_class" => error_class.to_s, "message" => message.to_s}
    end
  end
end
