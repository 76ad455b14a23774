# frozen_string_literal: true

require "json"

# A shareable instrumenter for tests: appends each event as a JSON line to a
# file (which works from any Ractor and any process), and can be told to
# raise on chosen events.
class RecordingInstrumenter
  def initialize(path, raise_on: [], error: RuntimeError, sleep_on: nil)
    @path = path.dup.freeze
    @raise_on = raise_on.map(&:to_s).freeze
    @error = error
    @sleep_on = sleep_on&.to_s.freeze
  end

  def instrument(name, payload)
    File.open(@path, "a") { |f| f.write("#{JSON.generate([name, payload])}\n") }
    sleep 3600 if name == @sleep_on # a hung instrumenter: its process is SIGKILLed while it waits here
    raise @error, "instrumenter failing on purpose (#{name})" if @raise_on.include?(name) || @raise_on.include?("*")
  end

  def self.events(path)
    return [] unless File.exist?(path)

    File.readlines(path, chomp: true).map { |line| JSON.parse(line) }
  end
end

# Fails every instrument call, for "a failing instrumenter changes nothing".
class RaisingInstrumenter
  def instrument(name, _payload) = raise(ArgumentError, "broken instrumenter: #{name}")
end
