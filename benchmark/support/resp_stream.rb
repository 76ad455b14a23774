# frozen_string_literal: true

module Bench
  # Splits one direction of a Redis connection into complete RESP2 values as
  # the bytes arrive, however they are cut into reads. Requests come out as
  # Arrays of Strings (a command and its arguments), replies as whatever
  # they are; only their number matters to RoundTripProxy.
  #
  # RESP3 is not understood: every client measured here (redis-rs, redis-rb
  # 4.8) speaks RESP2 unless told otherwise.
  class RespStream
    def initialize
      @buffer = +"".b
    end

    # The complete values in `bytes` and whatever was buffered before them.
    def feed(bytes)
      @buffer << bytes
      values = []
      position = 0
      while position < @buffer.bytesize
        value, after = parse(position)
        break unless after

        values << value
        position = after
      end
      @buffer = @buffer.byteslice(position..) || +"".b
      values
    end

    # True while part of a value has arrived and the rest has not.
    def partial? = !@buffer.empty?

    private

    # [value, offset after it], or nil when the value is not complete yet.
    def parse(position)
      line_end = @buffer.index("\r\n", position) or return nil
      line = @buffer.byteslice(position + 1, line_end - position - 1)
      after = line_end + 2
      case @buffer.getbyte(position)
      when 43, 45, 58 then [line, after] # + - :
      when 36 then bulk(Integer(line), after) # $
      when 42 then array(Integer(line), after) # *
      else [@buffer.byteslice(position, line_end - position).split(" "), after] # an inline command
      end
    end

    def bulk(length, after)
      return [nil, after] if length.negative?
      return nil if @buffer.bytesize < after + length + 2

      [@buffer.byteslice(after, length), after + length + 2]
    end

    def array(count, after)
      return [nil, after] if count.negative?

      items = Array.new(count) do
        item, after = parse(after)
        return nil unless after

        item
      end
      [items, after]
    end
  end
end
